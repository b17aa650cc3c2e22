"""``autotune pending`` and ``autotune tune --recorded``: list and tune the signatures a
program recorded with ``AUTOTUNE_RECORD`` (the logic lives in `autotune.record._replay`). Output goes
through the CLI's own consoles and tables (``_output``, ``_tables``), as every command's."""

from __future__ import annotations

import argparse
import os
from types import SimpleNamespace
from typing import Any

from autotune._paths import redact
from autotune.cli._output import PARTIAL, console, emit_json, stdout_to_stderr
from autotune.cli._tables import say, table, tell
from autotune.jit._record import size_text


def pending_json(row: Any) -> dict[str, Any]:
    """One ``autotune pending --json`` item: the record, its device key, and this device's view."""
    from autotune.program._abstract import short_signature

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
    from autotune.cache import Cache
    from autotune.program._abstract import short_signature
    from autotune.record._replay import pending_status

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


def cmd_tune_recorded(a: argparse.Namespace, base: Any, override: Any) -> int:
    """``autotune tune --recorded [--function KEY] [--trials N] [--time-budget T] [tune options]``:
    tune every recorded signature on this machine's device; a record that cannot be replayed
    is skipped with one line saying why, and the others go on. Each tuned one gets the same
    tables as ``autotune tune FILE``. ``--time-budget`` splits T by calls × default runtime
    (`autotune.record._budget`), shows the split before tuning and what each used after. ``base``: the
    :class:`TuneOptions` of the flags and ``override`` the objective figures they say
    (:class:`autotune.select._objective.Override`), both read by ``cli/_tune_cmd`` (the one reader of
    ``tune``'s flags).

    Returns:
        0 when every record was tuned (or was tuned before); 3 (``PARTIAL``) when one was
        skipped or failed; 1 when nothing is recorded; 2 for bad options (see
        :data:`autotune.cli.EXIT_STATUS`).
    """
    from autotune._errors import StudyError
    from autotune.cache import Cache
    from autotune.cli._show import show_result
    from autotune.program._abstract import short_signature
    from autotune.record._replay import tune_recorded

    out, err = console(wide=a.wide), console(stderr=True)
    if getattr(a, "workers", 1) not in (None, 1):
        raise StudyError(
            "--workers does not combine with --recorded. Run `autotune tune --recorded` once per device "
            "instead (with a shared --storage the runs share their studies)."
        )
    budget = getattr(a, "time_budget", None)
    if budget is not None and getattr(a, "timeout", None) is not None:
        raise StudyError(
            "--time-budget and --timeout both limit the time: --time-budget gives each recorded function its "
            "share as its timeout. Drop --timeout (or --time-budget to give every function the same --timeout)."
        )
    cache = Cache(a.cache)
    measuring: list[float] = []

    def shown(shares: list[Any], total: float, measuring_s: float) -> None:
        measuring.append(measuring_s)
        show_plan(err if a.json else out, shares, total, measuring_s, a.wide)

    with stdout_to_stderr(a.json):
        done = tune_recorded(
            cache,
            base.replace(progress=False if a.json else None),
            function=getattr(a, "function", None),
            override=override,
            say=lambda line: err.print(line, markup=False, highlight=False, soft_wrap=True),  # one line: grep finds it
            cache_flag=_cache_flag(a.cache),
            time_budget=budget,
            show_plan=shown,
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
                show_result(out, SimpleNamespace(key=key, cache=cache), d.result, wide=a.wide, timing=base.timing_mode)
        if budget is not None:
            show_spent(out, [d.share for d in done if d.share is not None], budget, sum(measuring), a.wide)
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
    if d.share is not None:
        sh = d.share
        item["budget"] = dict(calls=sh.calls, runtime_s=sh.runtime_s, weight=sh.weight, planned_s=sh.seconds)
        item["budget"].update(given_s=sh.given_s, used_s=sh.used_s, note=sh.note)
    if r is not None:
        from autotune.cli._show import charged_timing, seeding_json

        item.update(
            seeding=seeding_json(r),
            timing=charged_timing(r),
            best_config=r.best_config.to_dict(),
            best_cost=r.best_cost,
            default_cost=r.default_cost,
            study=r.study_name,
            storage=redact(r.storage),
        )
    return item


def show_plan(out: Any, shares: list[Any], budget_s: float, measuring_s: float, wide: bool) -> None:
    """The split of ``--time-budget``, before any tuning: each function's calls, its default's
    runtime, its share of the program's time (calls × runtime) and its seconds, in tuning order."""
    from autotune._display import seconds

    total = sum(s.weight for s in shares) or 1.0
    t = table(
        f"--time-budget {seconds(budget_s)}: {seconds(measuring_s)} measuring the defaults, the rest split by "
        "calls × default runtime",
        ("function", "signature", "calls", "default run", "share", "seconds"),
        right=("calls", "default run", "share", "seconds"),
        wide=wide,
    )
    for s in shares:
        run = "?" if s.runtime_s is None else seconds(s.runtime_s)
        t.add_row(s.function, s.signature, f"{s.calls:,.0f}", run, f"{100 * s.weight / total:.1f}%", f"{s.seconds:.1f}")
    out.print(t)
    planned = sum(s.seconds for s in shares)
    if planned > budget_s - measuring_s + 0.05:
        say(
            out,
            f"The floors ({planned:.1f} s, at least {min(s.floor_s for s in shares):.0f} s each) exceed the "
            f"budget left after measuring ({budget_s - measuring_s:.1f} s): every function gets its floor.",
            wide=wide,
        )
    for s in shares:
        if s.weight == 0:  # nothing skipped: its compile still counts in its cost
            why = s.note or f"{s.calls:g} expected calls"
            say(out, f"{s.label} weighs 0 ({why}): it gets its floor of {s.floor_s:.0f} s.", wide=wide)


def show_spent(out: Any, shares: list[Any], budget_s: float, measuring_s: float, wide: bool) -> None:
    """What each function of ``--time-budget`` was given when its turn came, and what it used."""
    right = ("planned s", "given s", "used s")
    t = table("the time budget as spent", ("function", "signature", *right), right=right, wide=wide)
    for s in shares:
        t.add_row(s.function, s.signature, f"{s.seconds:.1f}", f"{s.given_s or 0:.1f}", f"{s.used_s or 0:.1f}")
    out.print(t)
    tuning = sum(s.used_s or 0 for s in shares)
    say(
        out,
        f"used {measuring_s + tuning:.1f} s of the {budget_s:.1f} s budget: {measuring_s:.1f} s measuring the "
        f"defaults, {tuning:.1f} s tuning (a search stops at its share; its confirmation comes after it).",
        wide=wide,
    )
