"""What ``autotune tune`` prints for one tuned function, the same for a study file's example
and for a recorded call (``tune --recorded``): the contenders side by side, the trials that
gave no measurement, the winner, the cheapest config by call count, the timing mode charged, and
the site legend."""

from __future__ import annotations

from typing import Any

from autotune import _display
from autotune import select as _select
from autotune._paths import redact
from autotune.cli._tables import SiteNames, crossover_table, print_legend, result_table, say, trial_lines
from autotune.cli._wall import wall_table
from autotune.measuring._sampling import TIMING_MODES
from autotune.program._space import Space

TIMING_TEXT = {
    "steady": "the steady state of back-to-back calls",
    "blocking": "each call waited for on its own (blocking)",
    "device": "the device's own time per call (profiler)",
}


def charged_timing(result) -> str:
    """The timing mode the confirmed runtimes were charged in (the default's and the winner's when
    nothing was confirmed); modes joined by ``+`` in a study measured in several (resumed with
    another ``--timing``)."""
    ms = [p.measurement for p in result.confirmed if p.measurement is not None] or [result.default, result.best]
    modes = {m.timing for m in ms if m is not None}
    return "+".join(sorted(modes, key=lambda m: TIMING_MODES.index(m) if m in TIMING_MODES else 9)) or "steady"


def seeding_json(result) -> dict[str, Any] | None:
    """How a result's study was seeded from its neighbours, as ``--json`` shows it (its verdict's
    sentence in ``why``); None when it was not seeded."""
    seeding = getattr(result, "seeding", None)
    return None if seeding is None else seeding.to_json(lambda c: c.label(result.sites))


def timing_line(result, asked: str | None = None) -> str:
    """One line under the table: how the runtime column was timed (``asked``: the mode asked for)."""
    charged = charged_timing(result)
    text = " and ".join(TIMING_TEXT.get(m, m) for m in charged.split("+"))
    if asked == "device" and "device" not in charged:
        text += "; device time was asked for, and the profile gave none (as on the CPU)"
    return f"runtime: {text}"


def space_text(result) -> str:
    """The size of a result's space, and its two stages where XLA's options were tried on the best
    loop configs (``autotune.study._xla_search``): ``"106: 88 loop configs, then 18 with XLA options"``."""
    loops = len(Space(result.sites))
    extra = result.space_size - loops
    if extra <= 0:
        return str(result.space_size)
    return f"{result.space_size}: {loops} loop configs, then {extra} with XLA options on the best of them"


def budget_line(result) -> str:
    """One line on the memory budget a tune kept (`autotune.select._budget.feasible` decided)."""
    limit = result.objective.budget_bytes
    head = f"memory budget {_display.memory(limit)}: "
    mine = _select.point_of(result.confirmed, result.default_config)
    used = _display.memory(None if mine is None else mine.memory_bytes)
    if not any(_select.fits(p, limit) for p in result.confirmed):
        return head + f"no config measured fits it, so the default ({used}) stays"
    if mine is not None and not _select.fits(mine, limit):
        return head + f"the default ({used}) is over it, so the winner is the cheapest config that fits"
    over = sum(1 for t in result.trials if t.point() is not None and not _select.fits(t, limit))
    return head + f"{over} of the configs measured are over it and cannot win"


def show_result(out, fn, result, *, wide: bool = False, timing: str | None = None) -> None:
    """The tables and lines ``autotune tune`` prints for one function (one line for a
    finished study, which measured nothing); ``timing``: the timing mode asked for."""
    names = SiteNames(wide).add(result.sites, fn.key)
    goal = result.objective
    winner, default = result.best_config, result.default_config
    if result.finished:
        where = "unchanged" if result.stored != "written" else f"written to {fn.cache.display_url}"
        say(
            out,
            f"{fn.key}: finished, nothing new to measure ({len(result.trials)} trials, confirmed); winner "
            f"{names.config(winner)} ({_display.ratio(result.speedup)} the default's cost), cache entry "
            f"{where}; --reconfirm re-times it",
            wide=wide,
        )
        print_legend(out, names)
        return
    title = (
        f"{fn.key}: the contenders re-timed side by side, for {_select.format_calls(goal.expected_calls)} calls"
        + goal.describe()
    )
    out.print(result_table(result, names, title))
    say(out, timing_line(result, timing), wide=wide)
    if goal.budget_bytes is not None:
        say(out, budget_line(result), wide=wide)
    ranked = _select.ranked([p for p in result.confirmed if _select.fits(p, goal.budget_bytes)], goal)
    if ranked and ranked[0].config != winner:
        say(
            out,
            "★ the winner: a config must beat the default on the median cost and in enough paired rounds "
            f"({_select.wins_needed(3)} of 3, {_select.wins_needed(6)} of 6); a cheaper median above did not.",
            wide=wide,
        )
    if any(p.worker_processes == 2 for p in result.confirmed):
        say(
            out,
            "A challenger that beat the default in the first worker was measured again in a second, fresh one "
            "beside it (a program's runtime moves between processes); the rounds of both decided.",
            wide=wide,
        )
    counts = result.counts()
    say(
        out,
        f"{len(result.trials)} trials ({result.sampler} over a space of {space_text(result)}): "
        + ", ".join(f"{n} {state}" for state, n in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))),
        wide=wide,
    )
    for line in trial_lines(result.trials, names, out.width, full=wide):
        out.print(line, soft_wrap=True, highlight=False, markup=False)
    if getattr(result, "seeding", None) is not None:
        say(out, result.seeding.line(names.config), wide=wide)
    for site_id, why in (getattr(result, "unrewritable", None) or {}).items():
        say(out, f"site {names.name(site_id)} cannot be rewritten ({why}): it stays at its default", wide=wide)
    say(
        out,
        f"winner for {fn.key}: {names.config(winner)}  cost {_display.cost(result.best_cost)} "
        f"(default {_display.cost(result.default_cost)}, {_display.ratio(result.speedup)})",
        wide=wide,
    )
    if result.stored == "kept":
        say(
            out,
            f"the cache {fn.cache.display_url} keeps its entry from this study: no new trial, or no "
            "challenger beat its config in these paired rounds",
            wide=wide,
        )
    else:
        say(out, f"stored in the cache {fn.cache.display_url}", wide=wide)
    if wide:
        say(out, f"study {result.study_name} in {redact(result.storage)}", wide=wide)
    for note in getattr(result, "load_notes", None) or ():
        say(out, f"compilation cache: {note}", wide=wide)
    theirs = _select.point_of(result.confirmed, result.default_config) if goal.tier_up else None
    if theirs is not None and theirs.slowdown is not None:
        stretch = (
            f", and a compile took {theirs.compile_slowdown:.2f}x longer beside them"
            if theirs.compile_slowdown is not None
            else ""
        )
        say(
            out,
            f"tier-up: the default's calls ran {theirs.slowdown:.2f}x slower beside a compile{stretch} (measured; "
            "the tiered cost charges both while the winner compiles)",
            wide=wide,
        )
    if goal.shared and any(p.load_measured for p in result.confirmed):
        loads = ", ".join(
            f"{names.config(p.config)} {_display.seconds(p.load_cost_s)}"
            for p in _select.ranked(result.confirmed, goal)
            if p.load_measured
        )
        say(
            out,
            f"a later process loads from the compilation cache (trace + lower + load, measured): {loads}",
            wide=wide,
        )
    intervals = _select.crossover_intervals(result.confirmed, default=default, **goal.line_figures())
    if len(_display.listed_points(result.confirmed, intervals, winner)) > 1:
        out.print(
            crossover_table(
                result.confirmed,
                goal.compile_weight,
                goal.runtime_weight,
                names=names,
                chosen=winner,
                default=default,
                intervals=intervals,
                title=f"{fn.key}: the cheapest config by call count",
                goal=goal,
            )
        )
    say(out, f"measurements complete for {_display.range_text(result.complete_range)} calls", wide=wide)
    if result.wall is not None:
        out.print(wall_table(result.wall, wide))
    print_legend(out, names)
