"""``autotune best``, ``list``, ``export`` and ``import``: the cache, for people and scripts.

``best`` shows each entry's choice for a call count (re-picked by ``autotune.select`` through
``CacheEntry.for_objective``; ``--processes P [--compilation-cache on|off]`` re-picks for P
processes, each compiling or loading it once), the range of call counts its measurements are
complete for, and outside that range the command that re-tunes it; never a silent ``[0, ∞)``.
"""

from __future__ import annotations

import argparse
import difflib
import re
from typing import Any

from autotune import _display
from autotune import select as _select
from autotune.cli._output import console, emit_json, retune_lines
from autotune.cli._tables import SiteNames, crossover_table, print_legend, say, table, tell, tiered_of
from autotune.measuring._measurement import compile_total
from autotune.program._config import Config

_DTYPES = {"float": "f", "int": "i", "uint": "u", "bfloat": "bf", "complex": "c"}


def _entries(a: argparse.Namespace) -> list:
    from autotune.cache import Cache

    return Cache(a.cache).entries(function_key=getattr(a, "function", None))


def _weights(e) -> tuple[float, float]:
    return float(e.objective.get("compile_weight", 1.0)), float(e.objective.get("runtime_weight", 1.0))


def _intervals(e) -> list[dict[str, Any]]:
    """The entry's crossover intervals under its objective (its processes and compilation cache too)."""
    return _select.crossover_intervals(e.points, default=e.default_config, **e.goal.line_figures())


def _processes_text(e) -> str:
    """``8 (cache on)``: the processes an entry was picked for, and the compilation cache."""
    goal = e.goal
    return f"{goal.processes} (cache {'on' if goal.compilation_cache else 'off'})" if goal.processes != 1 else "1"


def _calls(e) -> float:
    return float(e.objective.get("expected_calls", 0))


def _tiered(e) -> float | None:
    """The entry's winner's tiered cost under its objective (tier-up on), or None when it does not
    qualify for tier-up (`autotune.select.tiered_cost_of`)."""
    return tiered_of(e.points, e.config, e.default_config, e.goal)


def signature_text(signature: str, limit: int = 28) -> str:
    """The array leaves of a signature, shortly: ``f32[32,32] f32[32,32] i32~[]``."""
    leaves = signature.split("|", 1)[-1]
    parts = []
    for leaf in leaves.split(";"):
        m = re.match(r"^(bfloat|float|uint|int|complex)(\d+)(.*)$", leaf)
        parts.append(f"{_DTYPES[m[1]]}{m[2]}{m[3]}" if m else leaf)
    return _display.shorten(" ".join(parts), limit, longest_word=limit)


def entry_json(e) -> dict[str, Any]:
    """An entry as ``best --json`` prints it: the entry, its device key, its crossovers, the
    complete range and whether its call count lies in it, and the command re-tuning for it."""
    intervals = _intervals(e)
    return e.to_dict() | {
        "device_key": e.device_key,
        "crossovers": _select.intervals_json(intervals),
        "complete_range": _select.range_json(e.covered_range),
        "in_range": e.covers(_calls(e)),
        "retune_command": e.retune_command(_calls(e)),
        "tiered_cost": _tiered(e),
        "memory_bytes": _memory(e),
        "max_memory": e.goal.budget_bytes,
    }


def _memory(e) -> int | None:
    """The winner's device memory (`autotune.measuring._measurement.device_memory`), as stored."""
    return e.measurements.get("memory_bytes")


def site_names(entries: list, wide: bool = False) -> SiteNames:
    """The short site names of the entries' functions, each function by the one rule (its
    sites over all its entries), so they match ``tune`` and ``report``."""
    names = SiteNames(wide)
    for e in entries:
        names.add([{"id": sid, **site} for sid, site in e.sites.items()], e.function_key)
    return names


def _what(a: argparse.Namespace) -> str:
    return (f" function {a.function!r}" if a.function else "") + (f" on device {a.device!r}" if a.device else "")


def _nearest(a: argparse.Namespace) -> str:
    """For an unknown ``--function``: the keys the cache has that look like it (all of them
    when few), as ``tune --function`` lists a study file's keys."""
    if not a.function:
        return ""
    from autotune.cache import Cache

    keys = sorted({e.function_key for e in Cache(a.cache).entries()})
    if not keys:
        return " The cache has no entries; `autotune tune FILE` makes some."
    if a.function in keys:
        return ""
    near = difflib.get_close_matches(a.function, keys, n=5, cutoff=0.4) or (keys if len(keys) <= 5 else [])
    shown = ", ".join(near) if near else ", ".join(keys[:5]) + ", ..."
    return f" Functions in the cache{' like it' if near and near != keys else ''}: {shown} (`autotune list` shows all)."


def _device_matches(e, want: str) -> bool:
    want = want.lower()
    return want in (str(e.device.get("device_kind", "")).lower(), str(e.device.get("platform", "")).lower())


def cmd_best(a: argparse.Namespace) -> int:
    entries = _entries(a)
    if a.device:
        entries = [e for e in entries if _device_matches(e, a.device)]
    cache = {"on": True, "off": False, None: None}[getattr(a, "compilation_cache", None)]
    processes = getattr(a, "processes", None)
    if (a.expected_calls, processes, cache) != (None, None, None):  # re-pick from the stored points
        entries = [
            e.for_objective(e.goal.overridden(a.expected_calls, processes=processes, compilation_cache=cache))
            for e in entries
        ]
    if not entries:
        tell(console(stderr=True), "no cache entry matches" + _what(a) + "." + _nearest(a))
        return 1
    if a.json:
        emit_json([entry_json(e) for e in entries])
        return 0
    out = console(wide=a.wide)
    names = site_names(entries, a.wide)
    out.print(_best_table(entries, names, a.wide))
    for e in entries:
        if not e.covers(_calls(e)):
            say(
                out,
                f"{e.function_key}: the configs were not measured for {_select.format_calls(_calls(e))} "
                f"calls (its measurements are complete for {_display.range_text(e.covered_range)} calls); "
                "the config above is the best measured one, not a tuned one. Re-tune for it:",
                wide=a.wide,
            )
            for line in retune_lines(e.retune_command(_calls(e)), out.width):
                out.print(line, soft_wrap=True, highlight=False, markup=False)
    for e in entries:
        cw, rw = _weights(e)
        intervals = _intervals(e)
        chosen = Config.from_dict(e.config)
        default = None if e.default_config is None else Config.from_dict(e.default_config)
        if len(_display.listed_points(e.points, intervals, chosen)) > 1:
            out.print(
                crossover_table(
                    e.points,
                    cw,
                    rw,
                    names=names.of(e.function_key),
                    chosen=chosen,
                    default=default,
                    intervals=intervals,
                    title=f"{e.function_key} on {e.device.get('device_kind', '?')}: the cheapest config by call count",
                    goal=e.goal,
                )
            )
    print_legend(out, names)
    return 0


def _best_table(entries: list, names: SiteNames, wide: bool):
    devices = {e.device_key for e in entries}
    keys = [(e.function_key, e.device_key) for e in entries]
    show_device = wide or len(devices) > 1
    show_signature = wide or len(set(keys)) < len(keys)
    show_processes = any(e.goal.processes != 1 for e in entries)
    tiered = {id(e): _tiered(e) for e in entries}
    show_tiered = any(x is not None for x in tiered.values())  # a winner qualifies for tier-up
    show_budget = any(e.goal.budget_bytes is not None for e in entries)
    cols = (
        ["function"]
        + (["device"] if show_device else [])
        + (["signature"] if show_signature else [])
        + ["config", "cost"]
        + (["tiered"] if show_tiered else [])
        + ["memory"]
        + (["budget"] if show_budget else [])
        + ["calls"]
        + (["processes"] if show_processes else [])
        + ["complete for"]
        + (["compile", "run"] if wide else [])
    )
    title = "best configs" + ("" if show_device else f" on {entries[0].device.get('device_kind', '?')}")
    t = table(title, cols, right=("cost", "tiered", "memory", "budget", "calls", "compile", "run"), wide=wide)
    for e in entries:
        row = [e.function_key]
        if show_device:
            row.append(e.device_key if wide else str(e.device.get("device_kind", "?")))
        if show_signature:
            row.append(e.signature if wide else signature_text(e.signature))
        row += [
            names.config(e.config, e.function_key),
            _display.cost(e.cost),
            *([_display.cost(tiered[id(e)]) if tiered[id(e)] is not None else "-"] if show_tiered else []),
            _display.memory(_memory(e)),
            *([_display.memory(e.goal.budget_bytes)] if show_budget else []),
            _select.format_calls(_calls(e)),
            *([_processes_text(e)] if show_processes else []),
            _display.range_text(e.covered_range),
        ]
        if wide:
            point = _select.point_of(e.points, Config.from_dict(e.config))
            m = e.measurements
            compile_figure = point.compile_cost_s if point else compile_total(m)
            row += [_display.seconds(compile_figure), _display.seconds(point.run_cost_s if point else m.get("run_s"))]
        t.add_row(*row)
    return t


def cmd_list(a: argparse.Namespace) -> int:
    entries = _entries(a)
    if a.json:
        emit_json([e.to_dict() | {"device_key": e.device_key} for e in entries])
        return 0
    out = console(wide=a.wide)
    names = site_names(entries, a.wide)
    cols = (["function", "fingerprint", "signature", "device"] if a.wide else ["function", "device"]) + [
        "config",
        "cost",
        "created",
    ]
    t = table(f"{len(entries)} cache entr{'y' if len(entries) == 1 else 'ies'}", cols, right=("cost",), wide=a.wide)
    for e in entries:
        row = [e.function_key]
        if a.wide:
            row += [e.fingerprint, e.signature, e.device_key]
        else:
            row.append(str(e.device.get("device_kind", "?")))
        row += [names.config(e.config, e.function_key), _display.cost(e.cost), e.created_at[:16].replace("T", " ")]
        t.add_row(*row)
    out.print(t)
    print_legend(out, names)
    return 0


def cmd_export(a: argparse.Namespace) -> int:
    from autotune.cache import Cache

    n = (cache := Cache(a.cache)).export_json(a.path)
    console().print(
        f"exported {n.entries} entries and {n.pending} pending records from {cache.display_url} to {a.path}",
        soft_wrap=True,
        highlight=False,
        markup=False,
    )
    return 0


def cmd_import(a: argparse.Namespace) -> int:
    from autotune.cache import MAX_IMPORT_BYTES, Cache

    limit = MAX_IMPORT_BYTES if a.max_size is None else max(1, int(a.max_size * 2**20))
    n = (cache := Cache(a.cache)).import_json(a.path, max_bytes=limit)
    console().print(
        f"imported {n.entries} entries and {n.pending} pending records into {cache.display_url}"
        + (f" ({n.pending_kept} pending records were there already)" if n.pending_kept else ""),
        soft_wrap=True,
        highlight=False,
        markup=False,
    )
    return 0
