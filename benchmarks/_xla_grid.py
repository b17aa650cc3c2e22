"""The bench's XLA dimension: whether the grid spans XLA's compile options, the tuner's two stages
against the product-space tuner, and their tables in the report.

The grid measures the loop configs first and then decides as the tuner does at its loop stage's
end: ``autotune.study._xla_search.searched`` on its best loop configs' measurements (``--xla
auto``; ``on`` spans them always). Where it does, the grid adds the product's XLA variants (every
loop config times every choice: the reference), the searches span them, and two approaches
join: ``loop_only`` (``xla=False``) and ``product`` (the tuner without stages, ``XLA_TOP = None``:
every loop config times every choice in one space, as before the stages). What the rule on the
default's one sample would have said (the tuner's rule before the stages) is recorded beside it.

A leaf of ``benchmarks.bench`` beside ``_study_run`` and ``_tables``: it imports only
``benchmarks._studies``.
"""

from __future__ import annotations

import argparse
import contextlib
from collections.abc import Iterator
from typing import Any

from benchmarks._studies import PRODUCT

TOP = 3  # the loop configs the rule reads where the tuner has no stages (XLA_TOP None)


def _point(p: dict[str, Any]) -> Any:
    from autotune.program._config import Config
    from autotune.select import Point

    return Point(Config.from_dict(p["config"]), p["compile_cost_s"], p["run_cost_s"])


def _basis(objective, points: list[Any], platform: str) -> dict[str, Any]:
    from autotune.study._xla_search import compile_share, searched

    share, seconds = compile_share(objective, points) if points else (None, None)
    return {
        "compile_share": share,
        "compile_cost_s": seconds,
        "searched": searched("auto", objective, points, platform),
    }


def xla_rule(a: argparse.Namespace, device: dict[str, Any], objective, loop_points: list[dict]) -> tuple[tuple, dict]:
    """``(choices, rule)``: the XLA choices the grid and the searches span (``()``: none) and what
    decided it: the rule on the loop grid's best points (``best``, cheapest first as the tuner ranks
    its loop stage's) and on the default's one sample alone (``default``)."""
    from autotune.program._xla import choices, offered
    from autotune.study._xla_search import XLA_TOP

    ok = [p for p in loop_points if p.get("state") == "complete"]
    best = [_point(p) for p in sorted(ok, key=lambda p: p["cost"])[: XLA_TOP or TOP]]
    first = loop_points[0] if loop_points and loop_points[0].get("state") == "complete" else None
    rule = {
        "best": _basis(objective, best, device["platform"]),
        "default": _basis(objective, [_point(first)] if first else [], device["platform"]),
    }
    on = a.xla == "on" or (a.xla == "auto" and rule["best"]["searched"])
    return (choices(offered(device["platform"], device["device_kind"])[0]) if on else ()), rule


@contextlib.contextmanager
def stages(approach: str) -> Iterator[None]:
    """The tuner's space for ``approach``: the product for ``product``, else its two stages."""
    from autotune.study import _xla_search

    top = _xla_search.XLA_TOP
    _xla_search.XLA_TOP = None if approach == PRODUCT else top
    try:
        yield
    finally:
        _xla_search.XLA_TOP = top


def _f(x, fmt="{:.3f}") -> str:
    return "-" if x is None else fmt.format(x)


def _rule_cell(b: dict[str, Any] | None) -> str:
    if not b or b.get("compile_share") is None:
        return "-"
    word = "yes" if b["searched"] else "no"
    return f"{b['compile_share']:.1%} of the cost, {b['compile_cost_s']:.3f} s: {word}"


RIGHT = {"calls", "regret product/grid", "regret tuned/grid", "product/tuned"}


def _section(title: str, note: str, columns: str, rows: list[str]) -> list[str]:
    """A markdown section: its title, a note, and a table of ``rows`` under ``columns`` (the first
    column left-aligned, ``calls`` and ratios right-aligned as the header's ``:`` say)."""
    if not rows:
        return []
    names = columns.split(" | ")
    rule = "|" + "|".join("---:" if n in RIGHT else "---" for n in names) + "|"
    return ["", f"## {title}", "", *([note, ""] if note else []), f"| {columns} |", rule, *rows]


def stages_table(result: dict[str, Any]) -> list[str]:
    """The markdown sections: the two stages against the product, and the rule's two inputs."""
    rows = []
    for st in (st for st in result["studies"] if PRODUCT in st["approaches"]):
        p, t = st["approaches"][PRODUCT], st["approaches"]["tuned"]
        cells = [
            st["study"],
            f"{st['expected_calls']:g}",
            f"{p.get('space_size')} → {t.get('space_size')}",
            f"{p['trials']} / {t['trials']}",
            f"{_f(p['tuning_wall_s'], '{:.1f}')} / {_f(t['tuning_wall_s'], '{:.1f}')}",
            *(_f(st.get(k)) for k in ("product_regret", "regret", "product_over_tuned")),
            f"`{p['label']}`",
            f"`{t['label']}`",
        ]
        rows.append("| " + " | ".join(cells) + " |")
    out = _section(
        "XLA's options: two stages against the product space",
        "`tuned`: the loop configs, then every XLA choice on the best 3 of them; `product`: every loop config "
        "times every choice in one space (the tuner before the stages), at the same trial budget.",
        "study | calls | space: product → stages | trials product / tuned | tuning wall s product / tuned | "
        "regret product/grid | regret tuned/grid | product/tuned | product pick | tuned pick",
        rows,
    )
    rows = [
        f"| {st['study']} | {st['expected_calls']:g} | {_rule_cell(st['xla_rule'].get('default'))} | "
        f"{_rule_cell(st['xla_rule'].get('best'))} | {'yes' if st.get('xla_choices') else 'no'} |"
        for st in result["studies"]
        if st.get("xla_rule")
    ]
    columns = "study | calls | the default's one sample | the best 3 loop configs (medians) | grid spans XLA"
    return out + _section("XLA's options: what `auto` decided on", "", columns, rows) + replay_table(result)


REPLAY_TOPS = (1, 2, 3, 5)


def _loops_of(config: dict[str, Any]) -> str:
    """A stored config's loop choices alone (its XLA options dropped), as one comparable text."""
    return repr(sorted((k, repr(v)) for k, v in config.items() if k != "@xla"))


def replay(points: list[dict[str, Any]], top: int) -> tuple[int, float] | None:
    """The two stages replayed on a product grid's own measurements (one sample each): ``(configs,
    best)``, the configs the stages would measure with ``top`` best loop configs and the cost of the
    best of them over the cost of the grid's best; None where the grid holds no XLA variant."""
    ok = [p for p in points if p.get("state") == "complete"]
    loops = sorted((p for p in ok if "@xla" not in p["config"]), key=lambda p: p["cost"])
    if not loops or len(loops) == len(ok):
        return None
    tops = {_loops_of(p["config"]) for p in loops[:top]}
    tried = [p for p in ok if "@xla" not in p["config"] or _loops_of(p["config"]) in tops]
    return len(tried), min(p["cost"] for p in tried) / min(p["cost"] for p in ok)


def replay_table(result: dict[str, Any]) -> list[str]:
    """How many best loop configs the XLA stage needs, replayed on each study's grid."""
    rows = []
    for st in result["studies"]:
        cells = [replay(st.get("grid_points") or [], k) for k in REPLAY_TOPS]
        if any(cells):
            shown = ["-" if c is None else f"{c[1]:.3f} ({c[0]})" for c in cells]
            rows.append(
                f"| {st['study']} | {st['expected_calls']:g} | {len(st['grid_points'])} | " + " | ".join(shown) + " |"
            )
    return _section(
        "XLA's options: the stages replayed on the grid's own measurements",
        "The best config the two stages would measure, trying the XLA choices on the best K loop configs of the "
        "grid (its one sample each), over the grid's best: 1.000 where the stages hold the grid's pick (configs "
        "measured in brackets).",
        "study | calls | grid | " + " | ".join(f"K={k}" for k in REPLAY_TOPS),
        rows,
    )
