"""Confirmation: re-measure the contenders side by side, so one noisy sample cannot win.

After the search, the contenders (the ``top`` cheapest measured configs, those cheapest at
some call count, and the default; for a Pareto search the whole measured front) are timed
again in ``rounds`` interleaved rounds (A B C, B C A, C A B ...). Runtime is re-timed on the
executables the warm worker still holds (:meth:`Runner.retime`), which costs no compile; a
contender whose executable is gone is measured in full. Compile time is measured again only
where its noise could flip the decision: when the winner's margin over the default (or the default's over the best
challenger) is smaller than :data:`COMPILE_NOISE` of their compile seconds. Those two are
then judged on compiles taken side by side in confirmation alone, never on the search's
(taken minutes apart, under another load: the default's reference rounds come first, in a
fresh worker): when the search's figures already put them within noise, each of their
rounds is a full measurement; when the re-timed figures do, each is compiled again until it
holds ``rounds`` fresh compile samples. Any other re-timed round takes the median of every
compile sample of its config. Each contender becomes a *point* with per-round samples
``[[compile_s, run_s], ...]`` paired by round index, which :mod:`autotune._select` decides on.

A program's runtime also differs between two processes (code and buffer placement), by more
than it varies within one: a challenger that leads the default by less than
:data:`PROCESS_NOISE` of its cost must win in a second, fresh worker too. The runner is
renewed (``Runner.renew``) and the default and every contender that beats it are re-timed there
in ``rounds`` more interleaved rounds, appended to their rounds (their compile figures stay those
taken above): with 3 rounds, the rule then needs 5 of the 6 paired rounds of both processes.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable, Sequence
from typing import Any

from .. import _select
from .._config import Config
from .._measure import Measurement
from .._objective import Objective

COMPILE_NOISE = 0.15
"""Relative compile-time noise assumed between two measurements of one config (at least)."""

PROCESS_NOISE = 0.15
"""The relative cost lead under which a challenger must also win in a second process. Measured:
the runtime of a fully unrolled bidirectional GRU (``studies/gru_encoder.py``) over the
default's, in five fresh processes on a 2-core CPU, ranged 1.28-1.67 (a ±13% spread), while
within each process it held to a few percent."""


def contenders(points: Sequence[dict[str, Any]], default: Config, objective: Objective, top: int,
               front_cap: int = 6, whole_front: bool = False) -> list[Config]:
    """The configs to confirm: the ``top`` cheapest, the configs cheapest at some call count
    (capped), the default.

    The configs cheapest at some call count are the lower envelope of the cost lines
    (:func:`autotune._select.crossover_intervals`): a point on the Pareto front above that
    envelope is never the winner for any call count, so re-timing it decides nothing. A Pareto
    search (``whole_front``) confirms the whole front, which is what it reports.
    """
    ranked = sorted(points, key=lambda p: (_select.cost(p, objective), _select.config_text(p["config"])))
    if whole_front:
        front = _select.pareto_front(points)
    else:
        front = [{"config": it["config"]} for it in _select.crossover_intervals(
            points, objective.compile_weight, objective.runtime_weight)]
    out: list[Config] = []
    for p in ranked[:top] + front[:front_cap]:
        c = Config.from_dict(p["config"])
        if c not in out:
            out.append(c)
    if default not in out:
        out.append(default)
    return out


def _sample(runner, config: Config, full: bool) -> tuple[Measurement | None, bool]:
    """One round's measurement of ``config`` and whether it compiled afresh (a full measure)."""
    try:
        if not full:
            m = runner.retime(config)
            if m is not None:
                return m, False
        return runner.measure(config), True
    except KeyboardInterrupt:
        raise
    except Exception:
        return None, True


def known_compiles(points: Sequence[dict[str, Any]]) -> dict[str, list[float]]:
    """Every compile sample the search took of each config (the default's reference rounds too)."""
    out: dict[str, list[float]] = {}
    for p in points:
        samples = [float(r[0]) for r in p["rounds"]] if p.get("rounds") else [float(p["compile_s"])]
        out.setdefault(_select.config_text(p["config"]), []).extend(samples)
    return out


def _point(config: Config, samples: list[tuple[Measurement | None, bool]], known: list[float]) -> dict[str, Any] | None:
    """A confirmed point. A re-timed round takes the median of ``known`` and the fresh
    compile samples, so a config whose executable had to be compiled again is not judged on
    one loaded compile against another's kept one."""
    ms = [(m, fresh) for m, fresh in samples if m is not None]
    if not ms:
        return None
    compiles = list(known) + [m.compile_total_s for m, fresh in ms if fresh]
    typical = statistics.median(compiles) if compiles else statistics.median(m.compile_total_s for m, _ in ms)
    rounds = [[m.compile_total_s if fresh else typical, m.run_s] for m, fresh in ms]
    only = [m for m, _ in ms]
    med = Measurement(
        trace_s=statistics.median(m.trace_s for m in only), lower_s=statistics.median(m.lower_s for m in only),
        compile_s=statistics.median(m.compile_s for m in only), run_s=statistics.median(m.run_s for m in only),
        run_iqr_s=statistics.median(m.run_iqr_s for m in only), reps=sum(m.reps for m in only), config=config,
        memory=only[-1].memory, flops=only[-1].flops)
    # Rounds stay paired by index; a round that failed is left out of the pairing for this config.
    return {"config": config.to_dict(), "compile_s": statistics.median(r[0] for r in rounds),
            "run_s": statistics.median(r[1] for r in rounds), "rounds": rounds, "confirmed": True,
            "measurement": med.to_dict()}


def _rotated(configs: list[Config], r: int) -> list[Config]:
    """Round ``r``'s order: A B C, then B C A, then C A B ..."""
    return configs[r % len(configs):] + configs[: r % len(configs)]


def _point_of(points: Sequence[dict[str, Any]], config: Config) -> dict[str, Any] | None:
    """The point of ``config`` among ``points``, or None."""
    text = _select.config_text(config)
    return next((p for p in points if _select.config_text(p["config"]) == text), None)


def _margin_is_noise(points: list[dict[str, Any]], default: Config, objective: Objective) -> list[Config]:
    """The configs whose compile noise could flip the decision (empty when it cannot)."""
    chosen = _select.winner(points, objective, default)
    d = _point_of(points, default)
    if chosen is None or d is None:
        return []
    if _select.config_text(chosen["config"]) != _select.config_text(default):
        rival = chosen
    else:
        others = [p for p in points if p is not d]
        if not others:
            return []
        rival = min(others, key=lambda p: _select.cost(p, objective))
    gap = abs(_select.cost(d, objective) - _select.cost(rival, objective))
    noise = objective.compile_weight * COMPILE_NOISE * (d["compile_s"] + rival["compile_s"])
    return [default, Config.from_dict(rival["config"])] if gap < noise else []


def second_process(points: list[dict[str, Any]], default: Config, objective: Objective) -> list[Config]:
    """The contenders to re-time in a second process (empty when the decision is clear): when
    the winner is not the default and leads it by less than :data:`PROCESS_NOISE` of its cost,
    every contender that beats the default (any of them could win once those rounds count)."""
    text = _select.config_text(default)
    d = _point_of(points, default)
    chosen = _select.winner(points, objective, default)
    if chosen is None or d is None or _select.config_text(chosen["config"]) == text:
        return []
    d_cost = _select.cost(d, objective)
    if d_cost - _select.cost(chosen, objective) >= PROCESS_NOISE * d_cost:
        return []
    return [Config.from_dict(p["config"]) for p in points if p is not d
            and _select.config_text(_select.winner([p, d], objective, default)["config"]) != text]


def confirm(runner, points: Sequence[dict[str, Any]], default: Config, objective: Objective, *, top: int = 3,
            rounds: int = 3, check: Callable[[], None] = lambda: None,
            whole_front: bool = False) -> list[dict[str, Any]]:
    """Confirmed points of the contenders (see the module docstring); the default's always among them
    when it can be measured at all."""
    rounds = max(1, int(rounds))
    configs = contenders(points, default, objective, top, whole_front=whole_front)
    runner.retain(configs)
    known = known_compiles(points)
    side = {c for c in _margin_is_noise(list(points), default, objective) if c in configs}  # full every round
    samples: dict[Config, list[tuple[Measurement | None, bool]]] = {c: [] for c in configs}
    for r in range(rounds):
        for config in _rotated(configs, r):
            check()
            samples[config].append(_sample(runner, config, full=config in side))
    extra: dict[Config, list[Measurement]] = {c: [] for c in configs}

    def points_now() -> list[dict[str, Any]]:
        out = []
        for c in configs:
            if c not in side:
                p = _point(c, samples[c], known.get(c.to_json(), []))
            elif (p := _point(c, samples[c], [m.compile_total_s for m in extra[c]])) is not None:
                fresh = [m for m, f in samples[c] if m is not None and f] + extra[c]
                for k in ("trace_s", "lower_s", "compile_s") if fresh else ():
                    p["measurement"][k] = statistics.median(getattr(m, k) for m in fresh)
                if extra[c]:
                    p["recompiled"] = len(extra[c])
            if p is not None:
                out.append(p)
        return out

    confirmed = points_now()
    # The winner may change with each pair compiled again, so look again (each config at most once).
    while True:
        recompile = [c for c in _margin_is_noise(confirmed, default, objective) if c not in side]
        if not recompile:
            break
        side.update(recompile)
        need = {c: rounds - sum(1 for m, fresh in samples[c] if m is not None and fresh) for c in recompile}
        while any(n > 0 for n in need.values()):
            for c in recompile:  # interleaved, as the rounds are
                if need[c] > 0:
                    need[c] -= 1
                    check()
                    m, _fresh = _sample(runner, c, full=True)
                    if m is not None:
                        extra[c].append(m)
        confirmed = points_now()
    challengers = second_process(confirmed, default, objective)
    renew = getattr(runner, "renew", None)  # a runner without another process to use has none
    if challengers and renew is not None and renew():
        pair, there = challengers + [default], set()
        for r in range(rounds):
            for config in _rotated(pair, r):
                check()
                m, _fresh = _sample(runner, config, full=False)  # compiled once there, then re-timed
                samples[config].append((m, False))  # its compile figure: the ones taken above
                if m is not None:
                    there.add(config)
        confirmed = points_now()
        for p in confirmed:
            if Config.from_dict(p["config"]) in there:
                p["processes"] = 2
    return confirmed
