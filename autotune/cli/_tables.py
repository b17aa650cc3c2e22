"""Tables that read at 80 columns: short site names with a legend, configs in the one
notation, times with their unit.

Every ★, winner and interval shown here comes from :mod:`autotune.select`; these
functions only lay out what it decided.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from autotune import _display
from autotune import select as _select
from autotune.measuring._outcome import Outcome
from autotune.program._config import XLA_KEY, Config, config_label


def _field(site: Any, name: str) -> Any:
    return site.get(name) if isinstance(site, Mapping) else getattr(site, name, None)


class SiteNames:
    """Short names for the loop sites in one command's output, per function, by the one rule
    of :func:`autotune._display.site_names`, so ``s2`` names the same loop in ``tune``,
    ``best``, ``list`` and ``report``. ``wide=True`` keeps full ids.

    Each function has its own names (``function`` is its key; None when the command shows
    one function). A site not added beforehand is numbered after the rule's names.

    Example::

        >>> names = SiteNames()
        >>> names.add([{"id": "algo", "name": "algo"}, {"id": "algo/scan@f.py:53"}])  # doctest: +ELLIPSIS
        <...SiteNames object at ...>
        >>> names.config({"algo/scan@f.py:53": {"repr": "scan", "unroll": 2}, "algo": {"repr": "for"}})
        'algo=for, s1=scan×2'
        >>> names.legend()
        ['s1 = algo/scan@f.py:53']
    """

    def __init__(self, wide: bool = False):
        self.wide = wide
        self._sites: dict[str | None, dict[str, dict[str, Any]]] = {}
        self._names: dict[str | None, dict[str, str]] = {}
        self._used: set[tuple[str | None, str]] = set()

    def add(self, sites: Iterable[Any], function: str | None = None) -> SiteNames:
        """Register sites of ``function`` (``LoopSite`` objects, their dicts, or bare ids)."""
        known = self._sites.setdefault(function, {})
        for s in sites:
            if isinstance(s, str):
                known.setdefault(s, {"id": s})
                continue
            sid = str(_field(s, "id"))
            info = {k: _field(s, k) for k in ("name", "kind", "derived")}
            known[sid] = {"id": sid, **{k: v for k, v in info.items() if v is not None}}
        self._names.pop(function, None)
        return self

    def _key(self, function: str | None) -> str | None:
        if function is None and None not in self._sites and len(self._sites) == 1:
            return next(iter(self._sites))
        return function

    def _table(self, function: str | None) -> dict[str, str]:
        if function not in self._names:
            self._names[function] = _display.site_names(list(self._sites.get(function, {}).values()))
        return self._names[function]

    def name(self, site_id: str, function: str | None = None) -> str:
        """The short name of a site (numbered now, after the others, if it was not added)."""
        function = self._key(function)
        self._used.add((function, site_id))
        if self.wide:
            return site_id
        names = self._table(function)
        if site_id not in names:
            taken = set(names.values())
            n = len(names) + 1
            while f"s{n}" in taken:
                n += 1
            names[site_id] = f"s{n}"
        return names[site_id]

    def config(self, config: Mapping[str, Any] | None, function: str | None = None) -> str:
        """A config in the one notation with short names: ``algo_iters=for, s1=scan×2``."""
        config = config.to_dict() if isinstance(config, Config) else dict(config or {})  # "@xla" kept
        shown = {sid: self.name(sid, function) for sid in config if sid != XLA_KEY}
        order = [sid for sid in self._table(self._key(function)) if sid in config]
        order += [sid for sid in shown if sid not in order]
        return config_label(config, [{"id": sid, "name": shown[sid]} for sid in order])

    def of(self, function: str | None) -> _Of:
        """These names bound to one function (what the table helpers take)."""
        return _Of(self, function)

    def derived(self, function: str | None = None) -> list[str]:
        """The ids of the sites JAX derived (the backward loop under ``jax.grad``)."""
        return [sid for sid, s in self._sites.get(self._key(function), {}).items() if s.get("derived")]

    def legend(self) -> list[str]:
        """``s1 = full/site@id.py:3`` for every shortened name used so far; under a line naming
        the function when the output shows several."""
        groups = []
        for function in [f for f in self._sites if f in self._names] if not self.wide else ():
            names = {sid: n for sid, n in self._names[function].items() if (function, sid) in self._used}
            lines = _display.site_legend(names, self.derived(function))
            if lines:
                groups.append((function, lines))
        if len(groups) == 1:
            return groups[0][1]
        return [ln for function, lines in groups for ln in [f"{function}:", *("  " + x for x in lines)]]


GAP = 2
"""Characters between two columns (a padding space and the box's blank rule)."""
SHORT = 12
"""A text column this narrow is not wrapped (a status, a device kind)."""


class Grid:
    """A table laid out for a width, whatever rich would do: a word, a number with its unit,
    a ``★`` or ``(default)`` with its config is never split; text columns wrap at spaces (ids
    also after ``:`` and ``/``); number columns never wrap; only a word longer than any column
    could hold is shortened, with ``…``. With ``wide`` every column takes its full width: each
    row is one line (a terminal folds it; a pipe keeps it whole)."""

    BREAKS = ":/"

    def __init__(self, title: str | None, columns: Sequence[str], right: Sequence[str] = (), wide: bool = False):
        self.title, self.columns, self.right, self.wide = title, list(columns), set(right), wide
        self.rows: list[list[str]] = []

    def add_row(self, *cells: Any) -> None:
        self.rows.append([_display.one_line(str(c)) for c in cells])

    def widths(self, width: int | None) -> list[int]:
        """Each column's width so that the table fits ``width`` (None: no limit)."""
        n = len(self.columns)
        natural = [max([len(h)] + [len(r[i]) for r in self.rows]) for i, h in enumerate(self.columns)]
        if width is None or sum(natural) + GAP * (n - 1) <= width:
            return natural
        # numbers and short columns (a status, a device) keep their width; long text wraps at
        # its words, and only as a last resort below its longest word (shortened with …)
        fixed = [h in self.right or natural[i] <= SHORT for i, h in enumerate(self.columns)]
        least = [
            natural[i]
            if fixed[i]
            else max([_display.longest_piece(h)] + [_display.longest_piece(r[i], self.BREAKS) for r in self.rows])
            for i, h in enumerate(self.columns)
        ]
        out = list(natural)
        lines = functools.lru_cache(maxsize=None)(self._lines)
        for floor in (least, [x if fixed[i] else min(x, 6) for i, x in enumerate(least)]):
            while sum(out) + GAP * (n - 1) > width:
                shrinkable = [i for i in range(n) if out[i] > floor[i]]
                if not shrinkable:
                    break
                # narrow the column that gains the fewest wrapped lines (a header first), the widest on a tie
                grows = (lambda i: lines(i, out[i] - 1) - lines(i, out[i])) if len(self.rows) <= 200 else (lambda i: 0)
                out[min(shrinkable, key=lambda i: (grows(i), -out[i]))] -= 1
        for _ in range(3):  # a wrapped column may use less than it got: hand the rest to one still wrapping
            out = [self._used(i, w) for i, w in enumerate(out)]
            spare = width - sum(out) - GAP * (n - 1)
            wrapping = [i for i in range(n) if out[i] < natural[i]]
            if spare <= 0 or not wrapping:
                break
            i = max(wrapping, key=lambda i: natural[i] - out[i])
            out[i] = min(natural[i], out[i] + spare)
        return out

    def _lines(self, i: int, width: int) -> int:
        """How many lines column ``i`` takes over all rows at ``width`` (its header counts half)."""
        cells = [r[i] for r in self.rows]
        body = sum(len(_display.wrap(c, width, breaks=self.BREAKS)) for c in cells)
        return 2 * body + len(_display.wrap(self.columns[i], width))

    def _used(self, i: int, width: int) -> int:
        """The widest line of column ``i`` once wrapped at ``width``."""
        if self.columns[i] in self.right:
            return width
        cells = [self.columns[i]] + [r[i] for r in self.rows]
        return max(len(ln) for c in cells for ln in _display.wrap(c, width, breaks=self.BREAKS) or [""])

    def __rich_console__(self, console, options):
        from rich import box
        from rich.table import Table
        from rich.text import Text

        widths = self.widths(None if self.wide else options.max_width)
        total = sum(widths) + GAP * (len(widths) - 1)
        if self.title:
            for line in [self.title] if self.wide else _display.wrap(self.title, max(total, options.max_width)):
                yield Text(line)
        t = Table(
            box=box.SIMPLE_HEAD,
            show_edge=False,
            pad_edge=False,
            padding=(0, 1, 0, 0),
            width=total if self.wide else None,
        )
        for h, w in zip(self.columns, widths):
            t.add_column(
                Text("\n".join(_display.wrap(h, w))),
                justify="right" if h in self.right else "left",
                width=w,
                no_wrap=True,
            )
        for row in self.rows:
            cells = []
            for i, (cell, w) in enumerate(zip(row, widths)):
                lines = (
                    [cell]
                    if self.columns[i] in self.right
                    else _display.wrap(cell, w, breaks=self.BREAKS, fold=self.wide)
                )
                cells.append(Text("\n".join(lines)))
            t.add_row(*cells)
        yield t


def table(title: str | None = None, columns: Sequence[str] = (), right: Sequence[str] = (), wide: bool = False) -> Grid:
    """A compact table (no vertical rules, so more of 80 columns holds text) laid out by
    :class:`Grid`. Its cells are plain text (a ``[...]`` in a reason is not rich markup)."""
    return Grid(title, columns, right, wide)


def print_legend(out, names: SiteNames) -> None:
    """The legend under a command's tables, each entry wrapped at word (or ``/``, ``:``)
    boundaries, its continuation indented; one line each through a pipe with ``--wide``."""
    for line in names.legend():
        say(out, line, indent="  ", wide=names.wide)


def say(out, text: str, *, indent: str = "", wide: bool = False) -> None:
    """Print a line of prose wrapped at word boundaries to the console's width (a number
    keeps its unit; see :func:`autotune._display.wrap`); with ``wide``, as one line."""
    if wide:
        lines = [_display.one_line(text)]
    else:
        lines = _display.wrap(
            text,
            out.width - len(indent) - 2,
            breaks=":/" if " = " in text else "",
            fold=out.is_terminal,  # a terminal folds an over-long path anyway; a log keeps it whole
            keep_long=not out.is_terminal,
        )
    for i, line in enumerate(lines):
        out.print(indent + ("  " if i and indent else "") + line, soft_wrap=True, highlight=False, markup=False)


def tell(err, text: str) -> None:
    """A message on stderr: one line in a log (grep finds it whole), wrapped at a terminal."""
    err.print(text, soft_wrap=not err.is_terminal, highlight=False, markup=False)


class _Of:
    """The names of one function's sites (``SiteNames.of``), for the table helpers."""

    def __init__(self, names: SiteNames, function: str | None):
        self.names, self.function, self.wide = names, function, names.wide

    def config(self, config: Mapping[str, Any] | None) -> str:
        return self.names.config(config, self.function)

    def name(self, site_id: str) -> str:
        return self.names.name(site_id, self.function)


def tiered_of(points: Sequence[Any], config: Any, default: Any, goal: Any) -> float | None:
    """The tiered cost of ``config``'s point among ``points`` under ``goal`` (tier-up on), against
    ``default``'s point; None when tier-up would not apply (`autotune.select.tiered_cost_of`)."""
    if config is None or default is None:
        return None
    mine = _select.point_of(points, Config.from_dict(config))
    theirs = _select.point_of(points, Config.from_dict(default))
    return None if mine is None else _select.tiered_cost_of(mine, theirs, goal)


def _spans(intervals: list[dict[str, Any]], config: Any) -> str:
    spans = [
        f"[{_select.format_calls(it['from_calls'])}, {_select.format_calls(it['to_calls'])})"
        for it in intervals
        if it["config"] == config
    ]
    return "; ".join(spans) or "never cheapest"


def crossover_table(
    points: Sequence[Mapping[str, Any]],
    compile_weight: float = 1.0,
    runtime_weight: float = 1.0,
    *,
    names: SiteNames,
    chosen: Any = None,
    default: Any = None,
    title: str | None = None,
    intervals: list | None = None,
    goal: Any = None,
):
    """The configs by call count: for each, the ``[from, to)`` intervals of
    :func:`autotune.select.crossover_intervals` (over every point, the default's
    included; or ``intervals`` as computed already) where it is the winner; ★ marks ``chosen``.
    ``points`` are :class:`autotune.select.Point` values; ``chosen`` and ``default`` are ``Config``.
    With ``goal`` (the objective), a "tiered at N" column where a listed config qualifies for
    tier-up: its tiered cost at the objective's call count (:func:`tiered_of`)."""
    if intervals is None:
        tier_up = bool(getattr(goal, "tier_up", False))
        intervals = _select.crossover_intervals(
            list(points), compile_weight, runtime_weight, default=default, tier_up=tier_up
        )
    listed = _display.listed_points(points, intervals, chosen)
    tiered = [None if goal is None else tiered_of(points, p.config, default, goal) for p in listed]
    shown = any(x is not None for x in tiered)
    head = f"tiered at {_select.format_calls(goal.expected_calls)}" if shown else ""
    columns = ("config", "compile", "run", *((head,) if shown else ()), "cheapest for calls")
    t = table(title, columns, right=("compile", "run", head), wide=names.wide)
    for p, x in zip(listed, tiered):
        t.add_row(
            with_equivalents(names, p, marked(names, p.config, chosen, default)),
            _display.seconds(p.compile_cost_s),
            _display.seconds(p.run_cost_s),
            *((_display.cost(x) if x is not None else "-",) if shown else ()),
            _spans(intervals, p.config),
        )
    return t


def marked(names: SiteNames, config: Any, chosen: Any = None, default: Any = None) -> str:
    """A config's label with `` ★`` when it is ``chosen`` and `` (default)`` when it is the default."""
    mark = " ★" if chosen is not None and chosen == config else ""
    tag = " (default)" if default is not None and default == config else ""
    return names.config(config) + mark + tag


def with_equivalents(names: SiteNames, point: Any, label: str) -> str:
    """``label`` followed by `` ≡ `` and each config that lowered to the same program as
    ``point`` (a :class:`autotune.select.Point`; one contender, named by its simplest form)."""
    return label + "".join(" ≡ " + names.config(e) for e in point.equivalent)


def result_table(result, names: SiteNames, title: str | None = None):
    """The configs a tune confirmed side by side, cheapest first; ★ marks the winner."""
    goal = result.objective
    winner, default = result.best_config, result.default_config
    rows = _select.ranked(result.confirmed, goal)
    tiered = [tiered_of(result.confirmed, row.config, default, goal) for row in rows]
    shown = any(x is not None for x in tiered)  # a "tiered" column where a config qualifies for tier-up
    columns = ("config", "compile", "run", "cost", *(("tiered",) if shown else ()), "memory", "vs default")
    t = table(title, columns, right=("compile", "run", "cost", "tiered", "memory", "vs default"), wide=names.wide)
    for row, x in zip(rows, tiered):
        c = _select.cost(row, goal)
        is_default = row.config == default
        label = with_equivalents(names, row, marked(names, row.config, winner))
        t.add_row(
            label,
            _display.seconds(row.compile_cost_s),
            _display.seconds(row.run_cost_s),
            _display.cost(c),
            *((_display.cost(x) if x is not None else "-",) if shown else ()),
            _display.memory(row.memory_bytes),
            _versus(result, row, c, is_default),
        )
    for r in result.over_budget():  # measured, never confirmed: listed with the figure that rules them out
        figures = (_display.seconds(r.point().compile_cost_s), _display.seconds(r.point().run_cost_s))
        t.add_row(names.config(r.config.to_dict()), *figures, _display.cost(r.cost), *(("-",) if shown else ()),
                  _display.memory(r.memory_bytes), "over budget")  # fmt: skip
    return t


def _versus(result, row: Any, c: float, is_default: bool) -> str:
    over = not _select.fits(row, result.objective.budget_bytes)
    if is_default:
        return "default, over budget" if over else "default"
    return "over budget" if over else _display.ratio(result.default_cost / c) if c > 0 else "-"


def trial_lines(trials: Sequence[Any], names: SiteNames, width: int, most: int = 8, full: bool = False) -> list[str]:
    """The trials that gave no measurement (not complete, shared, a duplicate, or still being
    measured by another worker), each with its reason wrapped at word boundaries under it:
    its first sentence in two lines at most, or with ``full`` (``--wide``) every trial and
    its whole reason."""
    bad = [t for t in trials if t.outcome is not None and not t.outcome.counts and t.outcome is not Outcome.DUPLICATE]
    if not bad:
        return []
    lines = [f"{len(bad)} of {len(trials)} trials gave no measurement:"]
    for t in bad if full else bad[:most]:
        lines.append(f"  #{t.number} {t.state}: {names.config(t.config.to_dict())}")
        if full:
            lines += ["      " + ln for ln in _display.wrap(t.reason, width - 6, fold=True)]
            continue
        reason = _display.first_sentence(t.reason)
        lines += ["      " + ln for ln in _display.wrap(reason, width - 6, max_lines=2)]
    if len(bad) > most and not full:
        lines.append(f"  ... and {len(bad) - most} more (--wide lists every one with its full reason)")
    elif not full and any(len(_display.wrap(t.reason, width - 6)) > 2 for t in bad):
        lines.append("  (--wide shows the full reasons)")
    return lines
