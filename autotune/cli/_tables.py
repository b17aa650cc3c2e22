"""Tables that read at 80 columns: short site names with a legend, configs in the one
notation, times with their unit.

Every ★, winner and interval shown here comes from :mod:`autotune._select`; these
functions only lay out what it decided.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from .. import _display, _select
from .._config import config_label
from .._runner import Outcome

MAX_NAME = 14
"""An ``at.loop`` name up to this long is shown as it is; longer names and every other site
id get a short alias (``s1``, ``s2``...) explained in the legend."""
_ALIAS = re.compile(r"^s\d+$")


def _field(site: Any, name: str) -> Any:
    return site.get(name) if isinstance(site, Mapping) else getattr(site, name, None)


class SiteNames:
    """Short, consistent names for the loop sites of one command's output.

    A site keeps its ``at.loop`` name when that is short; any other site is ``s1``,
    ``s2``..., numbered in the order sites are first added (program order), so the same
    site has the same name in every table of the command. ``wide=True`` keeps full ids.

    Example::

        >>> names = SiteNames()
        >>> names.add([{"id": "algo", "name": "algo"}, {"id": "algo/scan@f.py:53"}])
        >>> names.config({"algo/scan@f.py:53": {"repr": "scan", "unroll": 2}, "algo": {"repr": "for"}})
        'algo=for, s1=scan×2'
        >>> names.legend()
        ['s1 = algo/scan@f.py:53']
    """

    def __init__(self, wide: bool = False):
        self.wide = wide
        self._names: dict[str, str] = {}
        self._used: set[str] = set()
        self._count = 0

    def add(self, sites: Iterable[Any]) -> SiteNames:
        """Register sites (``LoopSite``\\ s or their dicts, or bare ids) in program order."""
        for s in sites:
            sid = s if isinstance(s, str) else str(_field(s, "id"))
            name = None if isinstance(s, str) else _field(s, "name")
            if name is None and not isinstance(s, str) and _field(s, "kind") == "loop":
                name = sid  # an at.loop's id is its name (cache entries keep no separate name)
            self._assign(sid, name)
        return self

    def _assign(self, sid: str, loop_name: str | None) -> str:
        if sid in self._names:
            return self._names[sid]
        taken = set(self._names.values())
        if self.wide:
            name = sid
        elif loop_name and len(loop_name) <= MAX_NAME and not _ALIAS.match(loop_name) and loop_name not in taken:
            name = loop_name
        else:
            while True:
                self._count += 1
                name = f"s{self._count}"
                if name not in taken:
                    break
        self._names[sid] = name
        return name

    def name(self, site_id: str) -> str:
        """The short name of a site (assigned now if the site was not added)."""
        self._used.add(site_id)
        return self._assign(site_id, None)

    def config(self, config: Mapping[str, Any] | None) -> str:
        """A config in the one notation with short names: ``algo_iters=for, s1=scan×2``."""
        config = dict(config or {})
        for sid in config:
            self.name(sid)
        order = [sid for sid in self._names if sid in config]
        return config_label(config, [{"id": sid, "name": self._names[sid]} for sid in order])

    def legend(self) -> list[str]:
        """``s1 = full/site@id.py:3`` for every shortened name used so far."""
        return [f"{name} = {sid}" for sid, name in self._names.items() if sid in self._used and name != sid]


def table(title: str | None = None, columns: Sequence[str] = (), right: Sequence[str] = ()):
    """A compact rich table: no vertical rules, so more of 80 columns holds text. Its cells
    are plain text (a ``[...]`` in a reason or a signature is not rich markup)."""
    from rich import box
    from rich.markup import escape
    from rich.table import Table

    class Plain(Table):
        def add_row(self, *cells: Any, **kwargs: Any) -> None:
            super().add_row(*(escape(c) if isinstance(c, str) else c for c in cells), **kwargs)

    t = Plain(
        title=title,
        box=box.SIMPLE_HEAD,
        show_edge=False,
        pad_edge=False,
        title_justify="left",
        min_width=len(title or ""),
    )  # a title wider than the columns would wrap to their width
    for col in columns:
        t.add_column(col, justify="right" if col in right else "left", overflow="fold")
    return t


def print_legend(out, names: SiteNames) -> None:
    for line in names.legend():
        out.print(f"  {line}", overflow="fold", highlight=False, markup=False)


def _spans(intervals: list[dict[str, Any]], config: Any) -> str:
    text = _select.config_text(config)
    spans = [
        f"[{_select.format_calls(it['from_calls'])}, {_select.format_calls(it['to_calls'])})"
        for it in intervals
        if _select.config_text(it["config"]) == text
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
):
    """The configs by call count: for each, the ``[from, to)`` intervals of
    :func:`autotune._select.crossover_intervals` (over every point, the default's
    included; or ``intervals`` as computed already) where it is the winner; ★ marks ``chosen``."""
    if intervals is None:
        intervals = _select.crossover_intervals(list(points), compile_weight, runtime_weight, default=default)
    t = table(title, ("config", "compile", "run", "cheapest for calls"), right=("compile", "run"))
    for p in _display.listed_points(points, intervals, chosen):
        t.add_row(
            with_equivalents(names, p, marked(names, p["config"], chosen, default)),
            _display.seconds(p["compile_s"]),
            _display.seconds(p["run_s"]),
            _spans(intervals, p["config"]),
        )
    return t


def marked(names: SiteNames, config: Any, chosen: Any = None, default: Any = None) -> str:
    """A config's label with `` ★`` when it is ``chosen`` and `` (default)`` when it is the default."""
    text = _select.config_text(config)
    mark = " ★" if chosen is not None and _select.config_text(chosen) == text else ""
    tag = " (default)" if default is not None and _select.config_text(default) == text else ""
    return names.config(config) + mark + tag


def with_equivalents(names: SiteNames, point: Mapping[str, Any], label: str) -> str:
    """``label`` followed by `` ≡ `` and each config that lowered to the same program as
    ``point`` (one contender, named by its simplest form)."""
    return label + "".join(" ≡ " + names.config(e) for e in point.get("equivalent") or ())


def result_table(result, names: SiteNames, title: str | None = None):
    """The configs a tune confirmed side by side, cheapest first; ★ marks the winner."""
    goal = result.objective
    t = table(title, ("config", "compile", "run", "cost", "vs default"), right=("compile", "run", "cost", "vs default"))
    winner, default = result.best_config.to_dict(), result.default_config.to_dict()
    for row in sorted(result.confirmed, key=lambda r: (_select.cost(r, goal), _select.config_text(r["config"]))):
        c = _select.cost(row, goal)
        is_default = _select.config_text(row["config"]) == _select.config_text(default)
        label = with_equivalents(names, row, marked(names, row["config"], winner))
        t.add_row(
            label,
            _display.seconds(row["compile_s"]),
            _display.seconds(row["run_s"]),
            _display.cost(c),
            "default" if is_default else _display.ratio(result.default_cost / c) if c > 0 else "-",
        )
    return t


def trial_lines(trials: Sequence[Any], names: SiteNames, width: int, most: int = 8) -> list[str]:
    """The trials that gave no measurement (not complete, shared, a duplicate, or still being
    measured by another worker), each with its reason wrapped at word boundaries under it."""
    bad = [t for t in trials if t.outcome is not None and not t.outcome.counts and t.outcome is not Outcome.DUPLICATE]
    if not bad:
        return []
    lines = [f"{len(bad)} of {len(trials)} trials gave no measurement:"]
    for t in bad[:most]:
        lines.append(f"  #{t.number} {t.state}: {names.config(t.config.to_dict())}")
        reason = _display.first_sentence(t.reason)
        lines += ["      " + ln for ln in _display.wrap(reason, width - 6, max_lines=2)]
    if len(bad) > most:
        lines.append(f"  ... and {len(bad) - most} more (autotune report shows every trial)")
    return lines
