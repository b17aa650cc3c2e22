"""``autotune tune``: tune a study file's examples, show what was decided, start helpers.

The winner, its cost and every ★ come from the study's result (``autotune.select``'s rule); this
module lays them out. ``--workers K`` starts K - 1 helper processes whose argv is derived
from the parsed arguments (:func:`autotune.cli._parser.repeat_argv`).
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
from typing import Any

from autotune import select as _select
from autotune._errors import StudyError
from autotune._options import Plumbing, TuneOptions
from autotune._paths import ENV_STORAGE, redact
from autotune.cache._store import command_retune
from autotune.cli._output import console, emit_json, stdout_to_stderr
from autotune.cli._parser import HELPER_ONLY, repeat_argv
from autotune.cli._show import charged_timing, seeding_json, show_result
from autotune.cli._tables import tiered_of
from autotune.jit._decorator import run_tune
from autotune.select._objective import Override

NOT_FOR_RETUNE = ("json", "wide", "expected_calls", "workers", "reconfirm", "builders") + HELPER_ONLY


def cmd_tune(a: argparse.Namespace) -> int:
    from autotune.measuring import _host

    _host.pin()  # this process traces and lowers; one worker owns the device (a TPU admits one process)
    if a.recorded == (a.file is not None):
        raise StudyError(
            "Give exactly one of a study FILE or --recorded: `autotune tune studies/x.py` tunes a study "
            "file, `autotune tune --recorded` the calls recorded with AUTOTUNE_RECORD=1."
        )
    if getattr(a, "time_budget", None) is not None and not a.recorded:
        raise StudyError(
            "--time-budget splits the time across recorded functions: use it with --recorded, "
            "or give a study FILE --timeout S per function."
        )
    if a.recorded:
        from autotune.cli._record import cmd_tune_recorded

        return cmd_tune_recorded(a, tune_options(a), said_objective(a))
    from autotune.measuring.process._protocol import Location

    out, err = console(wide=a.wide), console(stderr=True)
    with stdout_to_stderr(a.json):  # the study file's own prints go to stderr under --json
        examples = _selected(a)
        if a.join_study is not None:
            return _helper(a, examples)
        if a.workers > 1:
            warn_shared_device(a.workers, err)
        options = tune_options(a).replace(progress=False if a.json else None, reconfirm=a.reconfirm)
        results = []
        for ex in examples:
            ex.sites()  # a TypeError while tracing is one clear line, before any worker starts
            fn = ex.fn.with_options(**said_objective(a).keywords(), cache=a.cache)
            described = options.goal(fn.objective).describe()
            err.print(f"[bold]tuning[/bold] {fn.key} (expected_calls={fn.expected_calls:g}{described})")
            helpers = Helpers(a, ex.index)
            result = run_tune(
                fn,
                (ex.args, ex.kwargs),
                options,
                Plumbing(
                    on_ready=helpers.start,
                    before_finish=helpers.wait,
                    location=Location.study_file(a.file, ex.index),
                    retune=retune_template(a),
                ),
            )
            results.append((fn, result))
            if not a.json:
                show_result(out, fn, result, wide=a.wide, timing=options.timing_mode)
                if getattr(result, "compiled_in", None):
                    out.print(f"compiles: {result.compiled_in}")
    if a.json:
        emit_json([result_json(fn, r) for fn, r in results])
    return 0


def _selected(a: argparse.Namespace) -> list:
    from autotune.record._studyfile import load_examples

    examples = load_examples(a.file)
    if a.function is None:
        return examples
    chosen = [ex for ex in examples if ex.fn.key == a.function]
    if not chosen:
        keys = sorted({ex.fn.key for ex in examples})
        raise StudyError(
            f"Study file {a.file!r} has no example of function {a.function!r}; its functions are "
            f"{keys}. Pass one of them to --function, or leave --function out."
        )
    return chosen


def _helper(a: argparse.Namespace, examples: list) -> int:
    """A process started by ``--workers``: measure trials of the study, confirm nothing."""
    ex = next((e for e in examples if e.index == a.example), None)
    if ex is None:
        raise StudyError(f"Study file {a.file!r} has no examples()[{a.example}] any more; was it edited meanwhile?")
    fn = ex.fn.with_options(**said_objective(a).keywords(), cache=a.cache)
    options = tune_options(a).replace(study_name=a.join_study, progress=False)
    run_tune(fn, (ex.args, ex.kwargs), options, Plumbing(join=True))
    return 0


def said_objective(a: argparse.Namespace) -> Override:
    """The objective figures ``autotune tune``'s flags say, as one value (absent: None, the
    decorator's or the recording's; ``--compilation-cache auto``: detected in this process, after
    the study file set JAX up)."""
    from autotune.select._objective import compilation_cache_on

    said = getattr(a, "compilation_cache", None)
    cache = None if said is None else compilation_cache_on({"on": True, "off": False, "auto": None}[said])
    return Override(
        getattr(a, "expected_calls", None),
        getattr(a, "compile_weight", None),
        getattr(a, "runtime_weight", None),
        getattr(a, "processes", None),
        cache,
        getattr(a, "max_memory", None),
    )


_FLAG_OF = {
    "n_trials": "trials",
    "timeout": "timeout",
    "sampler": "sampler",
    "storage": "storage",
    "search": "search",
    "trial_timeout": "trial_timeout",
    "trial_memory_gb": "trial_memory",
}
"""The :class:`TuneOptions` fields that take a flag's value as it is (field -> the flag's dest)."""
_WHEN_GIVEN = ("confirm_top", "confirm_rounds", "builders")
"""Fields set only when their flag is given: else TuneOptions' defaults (the one home)."""


def tune_options(a: argparse.Namespace) -> TuneOptions:
    """The :class:`TuneOptions` of ``autotune tune``'s flags (built once, handed down as is)."""
    said = {field: getattr(a, flag) for field, flag in _FLAG_OF.items()}
    said.update({k: getattr(a, k) for k in _WHEN_GIVEN if getattr(a, k, None) is not None})
    xla = {"on": True, "off": False}.get(getattr(a, "xla", "auto"), "auto")
    return TuneOptions(
        **said,
        timing=timing_option(a),
        xla=xla,
        tier_up=bool(getattr(a, "tier_up", False)),
        neighbours=not getattr(a, "no_neighbours", False),
    )


def timing_option(a: argparse.Namespace) -> dict[str, Any] | None:
    """``--timing`` and ``--run-seconds`` as ``TuneOptions.timing`` (None when neither is given)."""
    timing = {} if a.run_seconds is None else {"target_s": a.run_seconds}
    if getattr(a, "timing", None) is not None:
        timing["mode"] = a.timing
    return timing or None


def _location(value: str) -> str:
    """A cache or storage for a command that may run elsewhere: an absolute path, or a URL
    with its password redacted (a command is shown and stored; a secret never is)."""
    return redact(value) if "://" in value else os.path.abspath(value)


def retune_template(a: argparse.Namespace) -> str:
    """The command that re-tunes like this one for another call count, ``{calls}`` standing
    for it: this command's options (paths absolute) with ``--expected-calls {calls}``."""
    b = argparse.Namespace(**vars(a))
    b.file = os.path.abspath(a.file)
    for name in ("cache", "storage"):
        if getattr(b, name, None):
            setattr(b, name, _location(getattr(b, name)))
    return command_retune(repeat_argv(b, skip=NOT_FOR_RETUNE))


def result_json(fn, r) -> dict[str, Any]:
    """One tuned function as ``tune --json`` prints it."""
    calls = r.objective.expected_calls
    return {
        "function": fn.key,
        "best_config": r.best_config.to_dict(),
        "best_cost": r.best_cost,
        "default_cost": r.default_cost,
        "objective": r.objective.to_dict(),
        "memory_bytes": r.best.memory_bytes,
        "max_memory": r.objective.budget_bytes,
        "study": r.study_name,
        "storage": redact(r.storage),
        "cache": fn.cache.display_url,
        "complete_range": _select.range_json(r.complete_range),
        "in_range": _select.in_range(r.complete_range, calls),
        "trials": [t.to_dict() for t in r.trials],
        "confirmed": [p.to_json() for p in r.confirmed],
        "pareto": [p.to_json() for p in r.pareto],
        "finished": r.finished,
        "new_trials": r.new_trials,
        "stored": r.stored,
        "unrewritable": dict(getattr(r, "unrewritable", {}) or {}),
        "load_notes": list(getattr(r, "load_notes", []) or []),
        "compiled_in": getattr(r, "compiled_in", None),
        "timing": charged_timing(r),
        "tiered_cost": tiered_of(r.confirmed, r.best_config, r.default_config, r.objective),
        "wall": None if r.wall is None else r.wall.to_json(),
        "seeding": seeding_json(r),
    }


def warn_shared_device(workers: int, err=None) -> None:
    from autotune.measuring import _host

    err = err or console(stderr=True)
    device = _host.target_device()  # where the trials run (a trace-only process asks a worker)
    if device["device_count"] < workers:
        err.print(
            f"[yellow]warning:[/yellow] {workers} workers share {device['device_count']} {device['platform']} "
            "device(s) on this machine; concurrent trials disturb each other's timings. The rule is one worker "
            "per device: for more throughput, run `autotune tune FILE --storage postgresql://...` on more machines."
        )


class Helpers:
    """The extra processes of ``--workers K``: they join the study once it exists."""

    def __init__(self, a: argparse.Namespace, index: int):
        self.a, self.index, self.procs = a, index, []

    def argv(self, study_name: str) -> list[str]:
        """``python -m autotune tune ... --join-study NAME --example I``: this command's options,
        less those a helper must not repeat (see ``_parser.NOT_FOR_HELPERS``)."""
        return [
            sys.executable,
            "-m",
            "autotune",
            *repeat_argv(self.a),
            "--join-study",
            study_name,
            "--example",
            str(self.index),
        ]

    def start(self, storage: str, study_name: str) -> None:
        if self.a.workers <= 1:
            return
        env = dict(os.environ, **{ENV_STORAGE: storage})  # the storage, password included, never in argv
        self.procs = [subprocess.Popen(self.argv(study_name), env=env) for _ in range(self.a.workers - 1)]

    def wait(self) -> None:
        failed = [p.args for p in self.procs if p.wait() != 0]
        if failed:
            console(stderr=True).print(
                f"[yellow]warning:[/yellow] {len(failed)} worker process(es) exited with an "
                "error; their completed trials are kept."
            )
