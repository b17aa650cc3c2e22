"""``autotune pending`` and ``autotune tune --recorded``: list and tune the signatures a
program recorded with ``AUTOTUNE_RECORD`` (the logic lives in `autotune._replay`)."""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import sys
from collections.abc import Iterator
from typing import Any

from rich.console import Console
from rich.table import Table

from .._paths import redact
from .._record import size_text


def _consoles() -> tuple[Console, Console]:
    # A terminal gets its own width; a pipe rich's default (80, or $COLUMNS): the table fits either.
    return Console(highlight=False), Console(stderr=True, highlight=False)


def pending_json(row: Any) -> dict[str, Any]:
    """One ``autotune pending --json`` item: the record, its device key, and this device's view."""
    from .._abstract import short_signature

    rec = row.record
    return rec.to_dict() | {
        "device_key": rec.device_key,
        "short_signature": short_signature(rec.abstract),
        "tuned_here": row.tuned_here,
        "values_stored": row.values_stored,
    }


def cmd_pending(a: argparse.Namespace) -> int:
    """``autotune pending [--json] [--cache URL]``: the recorded signatures; for this
    machine's device whether a tuned entry exists; replayable or why not; values or not."""
    from .._abstract import short_signature
    from .._replay import pending_status
    from ..cache import Cache

    out, _ = _consoles()
    cache = Cache(a.cache)
    rows = pending_status(cache)
    if a.json:
        print(json.dumps([pending_json(r) for r in rows], indent=2))
        return 0
    if not rows:
        out.print(
            f"No recorded signatures in {cache.display_url}. Run your program with AUTOTUNE_RECORD=1 "
            "(or AUTOTUNE_RECORD=values) to record the calls it makes."
        )
        return 0
    wide = bool(getattr(a, "wide", False))
    notes: list[str] = []

    def note(text: str) -> str:
        notes.append(text)
        return f"[{len(notes)}]"

    cells = []
    for r in rows:
        rec = r.record
        key = rec.function_key
        status = "tuned" if r.tuned_here else "to tune" if rec.replayable else "no " + note(f"{key}: {rec.why_not}.")
        values = rec.values or {}
        if r.values_stored:
            shown = size_text(int(values.get("bytes", 0)))
        elif values.get("note"):
            shown = "no " + note(f"{key} values: {values.get('note')}.")
        elif rec.value_files:
            shown = "lost " + note(f"{key}: its value files are gone from {cache.values_dir}.")
        else:
            shown = "-"
        device = rec.device_key if wide else str(rec.device.get("device_kind", "?"))
        cells.append([key, short_signature(rec.abstract), device, status, shown])
    headers = ["function", "signature", "recorded on", "status", "values"]
    table = Table(
        title=f"{len(rows)} recorded signature{'s' if len(rows) != 1 else ''}",
        box=None,
        title_justify="left",
        pad_edge=False,
    )
    widths = [max(len(h), *(len(c[i]) for c in cells)) for i, h in enumerate(headers)]
    if not wide:  # fit the console: the fixed columns keep their width, the function and signature share the rest
        widths[2] = min(widths[2], 14)
        rest = max(24, out.width - 2 * (len(headers) - 1) - sum(widths[2:]))
        widths[0] = min(widths[0], max(rest - widths[1], rest // 2))
        widths[1] = min(widths[1], rest - widths[0])
    for h, w in zip(headers, widths):
        if wide:
            table.add_column(h, overflow="fold")
        else:
            table.add_column(h, width=w, no_wrap=True, overflow="ellipsis")
    for row in cells:
        table.add_row(*row)
    table.columns[0].header_style = table.columns[1].header_style = "bold"
    out.print(table)
    out.print(
        "status: tuned = a tuned entry exists for this device; values: - = shapes only (synthesized inputs when tuned)."
    )
    for i, text in enumerate(notes, 1):
        out.print(f"[{i}] {text}", markup=False)
    if any(not r.tuned_here and r.record.replayable for r in rows):
        out.print("Tune them on this machine's device: autotune tune --recorded", markup=False)
    out.print(f"cache: {cache.display_url}", markup=False)
    return 0


@contextlib.contextmanager
def _stdout_to_stderr() -> Iterator[None]:
    """Send everything printed meanwhile (the user's code while traced, too) to stderr, so
    stdout carries only the JSON printed afterwards."""
    sys.stdout.flush()
    saved, old = os.dup(1), sys.stdout
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    try:
        yield
    finally:
        sys.stdout.flush()
        os.dup2(saved, 1)
        os.close(saved)
        sys.stdout = old


def _cache_flag(cache: str | None) -> str | None:
    """The ``--cache`` text for the stored re-tune command: absolute, and never a password."""
    if not cache or redact(cache) != cache:
        return None
    return cache if "://" in cache else os.path.abspath(cache)


def cmd_tune_recorded(a: argparse.Namespace) -> int:
    """``autotune tune --recorded [--function KEY] [--trials N] [tune options]``: tune every
    recorded signature on this machine's device; a record that cannot be replayed is
    skipped with one line saying why, and the others go on.

    Returns:
        0 when every record was tuned (or was tuned before), 1 when one was skipped or
        failed or nothing is recorded, 2 for bad options.
    """
    from .._abstract import short_signature
    from .._replay import tune_recorded
    from ..cache import Cache

    out, err = _consoles()
    if getattr(a, "workers", 1) not in (None, 1):
        err.print(
            "[red]error:[/red] --workers does not combine with --recorded. Run `autotune tune --recorded` "
            "once per device instead (with a shared --storage the runs share their studies).",
            soft_wrap=True,
        )
        return 2
    cache = Cache(a.cache)
    run_seconds = getattr(a, "run_seconds", None)
    options = dict(
        sampler=getattr(a, "sampler", "auto"),
        storage=getattr(a, "storage", None),
        objective=getattr(a, "objective", "cost"),
        trial_timeout=getattr(a, "trial_timeout", None),
        trial_memory_gb=getattr(a, "trial_memory", None),
        timing=None if run_seconds is None else {"target_s": run_seconds},
        progress=False if a.json else None,
    )
    say = lambda line: err.print(line, markup=False, soft_wrap=True)  # noqa: E731
    with _stdout_to_stderr() if a.json else contextlib.nullcontext():
        done = tune_recorded(
            cache,
            function=getattr(a, "function", None),
            n_trials=getattr(a, "trials", None),
            timeout=getattr(a, "timeout", None),
            expected_calls=getattr(a, "expected_calls", None),
            compile_weight=getattr(a, "compile_weight", None),
            runtime_weight=getattr(a, "runtime_weight", None),
            say=say,
            cache_flag=_cache_flag(a.cache),
            **options,
        )
    if not done:
        which = f" of {a.function}" if getattr(a, "function", None) else ""
        err.print(
            f"No recorded signatures{which} in {cache.display_url}. Run your program with AUTOTUNE_RECORD=1 "
            "first; `autotune pending` lists what is recorded.",
            markup=False,
            soft_wrap=True,
        )
        return 1
    if a.json:
        print(json.dumps([_outcome_json(d, short_signature) for d in done], indent=2, allow_nan=False))
    else:
        for d in done:
            r = d.result
            if r is not None:
                out.print(
                    f"winner for {d.record.function_key} {short_signature(d.record.abstract)}: "
                    f"{r.best_config.label(r.sites)}  cost {r.best_cost:.4g} s (default {r.default_cost:.4g} s, "
                    f"{r.speedup:.2f}x) on {d.inputs}",
                    markup=False,
                )
        tuned = sum(d.status == "tuned" for d in done)
        out.print(
            f"{tuned} tuned, {sum(d.status == 'tuned before' for d in done)} tuned before, "
            f"{sum(d.status in ('skipped', 'failed') for d in done)} skipped -> cache {cache.display_url}",
            markup=False,
        )
    return 1 if any(d.status in ("skipped", "failed") for d in done) else 0


def _outcome_json(d: Any, short_signature: Any) -> dict[str, Any]:
    rec, r = d.record, d.result
    item = {
        "function": rec.function_key,
        "signature": rec.signature,
        "short_signature": short_signature(rec.abstract),
        "fingerprint": rec.fingerprint,
        "status": d.status,
        "reason": d.reason,
        "inputs": d.inputs,
    }
    if r is not None:
        item.update(
            best_config=r.best_config.to_dict(),
            best_cost=r.best_cost,
            default_cost=r.default_cost,
            study=r.study_name,
            storage=redact(r.storage),
        )
    return item
