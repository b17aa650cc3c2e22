"""``autotune pending`` and ``autotune tune --recorded``: list and tune the signatures a
program recorded with ``AUTOTUNE_RECORD`` (the logic lives in `autotune._replay`). Output goes
through the CLI's own consoles and tables (``_output``, ``_tables``), as every command's."""

from __future__ import annotations

import argparse
import os
from types import SimpleNamespace
from typing import Any

from .._paths import redact
from .._record import size_text
from ._output import PARTIAL, console, emit_json, stdout_to_stderr
from ._tables import say, table, tell


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
    """``autotune pending [--json] [--wide] [--cache URL]``: the recorded signatures; for this
    machine's device whether a tuned entry exists; replayable or why not; values or not."""
    from .._abstract import short_signature
    from .._replay import pending_status
    from ..cache import Cache

    cache = Cache(a.cache)
    rows = pending_status(cache)
    if a.json:
        emit_json([pending_json(r) for r in rows])
        return 0
    wide = bool(getattr(a, "wide", False))
    out = console(wide=wide)
    if not rows:
        say(
            out,
            f"No recorded signatures in {cache.display_url}. Run your program with AUTOTUNE_RECORD=1 "
            "(or AUTOTUNE_RECORD=values) to record the calls it makes.",
        )
        return 0
    notes: list[str] = []

    def note(text: str) -> str:
        notes.append(text)
        return f"[{len(notes)}]"

    t = table(
        f"{len(rows)} recorded signature{'s' if len(rows) != 1 else ''}",
        ("function", "signature", "recorded on", "status", "values"),
        wide=wide,
    )
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
        t.add_row(key, short_signature(rec.abstract), device, status, shown)
    out.print(t)
    say(
        out,
        "status: tuned = a tuned entry exists for this device; values: - = shapes only "
        "(synthesized inputs when tuned).",
        wide=wide,
    )
    for i, text in enumerate(notes, 1):
        say(out, f"[{i}] {text}", wide=wide)
    if any(not r.tuned_here and r.record.replayable for r in rows):
        say(out, "Tune them on this machine's device: autotune tune --recorded", wide=wide)
    say(out, f"cache: {cache.display_url}", wide=wide)
    return 0


def _cache_flag(cache: str | None) -> str | None:
    """The ``--cache`` text for the stored re-tune command: absolute, and never a password."""
    if not cache or redact(cache) != cache:
        return None
    return cache if "://" in cache else os.path.abspath(cache)


def cmd_tune_recorded(a: argparse.Namespace) -> int:
    """``autotune tune --recorded [--function KEY] [--trials N] [tune options]``: tune every
    recorded signature on this machine's device; a record that cannot be replayed is
    skipped with one line saying why, and the others go on. Each tuned one gets the same
    tables as ``autotune tune FILE``.

    Returns:
        0 when every record was tuned (or was tuned before); 3 (``PARTIAL``) when one was
        skipped or failed; 1 when nothing is recorded; 2 for bad options (see
        :data:`autotune.cli.EXIT_STATUS`).
    """
    from .._abstract import short_signature
    from .._errors import StudyError
    from .._replay import tune_recorded
    from ..cache import Cache
    from ._show import show_result

    out, err = console(wide=a.wide), console(stderr=True)
    if getattr(a, "workers", 1) not in (None, 1):
        raise StudyError(
            "--workers does not combine with --recorded. Run `autotune tune --recorded` once per device "
            "instead (with a shared --storage the runs share their studies)."
        )
    cache = Cache(a.cache)
    run_seconds = getattr(a, "run_seconds", None)
    options = dict(
        sampler=getattr(a, "sampler", "auto"),
        storage=getattr(a, "storage", None),
        search=getattr(a, "search", "cost"),
        trial_timeout=getattr(a, "trial_timeout", None),
        trial_memory_gb=getattr(a, "trial_memory", None),
        timing=None if run_seconds is None else {"target_s": run_seconds},
        progress=False if a.json else None,
    )
    with stdout_to_stderr(a.json):
        done = tune_recorded(
            cache,
            function=getattr(a, "function", None),
            n_trials=getattr(a, "trials", None),
            timeout=getattr(a, "timeout", None),
            expected_calls=getattr(a, "expected_calls", None),
            compile_weight=getattr(a, "compile_weight", None),
            runtime_weight=getattr(a, "runtime_weight", None),
            say=lambda line: err.print(line, markup=False, highlight=False, soft_wrap=True),  # one line: grep finds it
            cache_flag=_cache_flag(a.cache),
            **options,
        )
    if not done:
        which = f" of {a.function}" if getattr(a, "function", None) else ""
        tell(
            err,
            f"No recorded signatures{which} in {cache.display_url}. Run your program with AUTOTUNE_RECORD=1 "
            "first; `autotune pending` lists what is recorded.",
        )
        return 1
    if a.json:
        emit_json([_outcome_json(d, short_signature) for d in done])
    else:
        for d in done:
            if d.result is not None:  # the function as `tune FILE` shows it, its signature beside its key
                key = f"{d.record.function_key} {short_signature(d.record.abstract)}"
                show_result(out, SimpleNamespace(key=key, cache=cache), d.result, wide=a.wide)
        skipped = sum(d.status in ("skipped", "failed") for d in done)
        say(
            out,
            f"{sum(d.status == 'tuned' for d in done)} tuned, {sum(d.status == 'tuned before' for d in done)} "
            f"tuned before, {skipped} skipped -> cache {cache.display_url}",
            wide=a.wide,
        )
    return PARTIAL if any(d.status in ("skipped", "failed") for d in done) else 0


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
