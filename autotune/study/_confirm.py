"""Confirmation: re-measure the contenders side by side, so one noisy sample cannot win.

After the search, the contenders (the ``top`` cheapest measured configs, the measured
Pareto front, and the default) are timed again in ``rounds`` interleaved rounds
(A B C, B C A, C A B ...). Runtime is re-timed on the executables the warm worker still
holds (:meth:`Runner.retime`), which costs no compile; a contender whose executable is
gone is measured in full. Compile time is measured again only where its noise could flip
the decision: when the winner's margin over the default (or the default's over the best
challenger) is smaller than :data:`COMPILE_NOISE` of their compile seconds. Those two are
then judged on compiles taken side by side in confirmation alone, never on the search's
(taken minutes apart, under another load: the default's reference rounds come first, in a
fresh worker): when the search's figures already put them within noise, each of their
rounds is a full measurement; when the re-timed figures do, each is compiled again until it
holds ``rounds`` fresh compile samples. Any other re-timed round takes the median of every
compile sample of its config. Each contender becomes a *point* with per-round samples
``[[compile_s, run_s], ...]`` paired by round index, which :mod:`autotune._select` decides on.
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


def contenders(points: Sequence[dict[str, Any]], default: Config, objective: Objective, top: int,
               front_cap: int = 6) -> list[Config]:
    """The configs to confirm: the ``top`` cheapest, the Pareto front (capped), the default."""
    ranked = sorted(points, key=lambda p: (_select.cost(p, objective), _select.config_text(p["config"])))
    out: list[Config] = []
    for p in ranked[:top] + _select.pareto_front(points)[:front_cap]:
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


def _margin_is_noise(points: list[dict[str, Any]], default: Config, objective: Objective) -> list[Config]:
    """The configs whose compile noise could flip the decision (empty when it cannot)."""
    chosen = _select.winner(points, objective, default)
    by_text = {_select.config_text(p["config"]): p for p in points}
    d = by_text.get(_select.config_text(default))
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


def confirm(runner, points: Sequence[dict[str, Any]], default: Config, objective: Objective, *, top: int = 3,
            rounds: int = 3, check: Callable[[], None] = lambda: None) -> list[dict[str, Any]]:
    """Confirmed points of the contenders (see the module docstring); the default's always among them
    when it can be measured at all."""
    rounds = max(1, int(rounds))
    configs = contenders(points, default, objective, top)
    runner.retain(configs)
    known = known_compiles(points)
    side = {c for c in _margin_is_noise(list(points), default, objective) if c in configs}  # full every round
    samples: dict[Config, list[tuple[Measurement | None, bool]]] = {c: [] for c in configs}
    for r in range(rounds):
        for config in configs[r % len(configs):] + configs[: r % len(configs)]:
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
    return confirmed
