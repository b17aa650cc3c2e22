"""Replay: rebuild a recorded call here and tune it on this machine's device.

`tune_recorded` is ``autotune tune --recorded``: for each recorded signature it imports
the function (`import_recorded`: module and qualname; a script's function from its file,
under the module name it was keyed by), builds the inputs (`build_inputs`: the recorded
values where present, else synthesized), checks that the program and signature are the
ones recorded, and tunes it exactly as a study file would (``time_budget``: split by
`autotune.record._budget`). A record that cannot be replayed is skipped with one line saying why.
`autotune.record._inputs` rebuilds the arguments and says how missing values are synthesized.
"""

from __future__ import annotations

import importlib
import importlib.util
import os
import shlex
import sys
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from autotune._errors import AutotuneError, error_text
from autotune._options import Plumbing, TuneOptions
from autotune.cache import Cache, PendingRecord
from autotune.cache._store import command_retune
from autotune.jit._decorator import controller, run_tune
from autotune.jit._fn_tune import FN_TUNE
from autotune.jit._record import jit_options
from autotune.measuring import _host
from autotune.program import _keys
from autotune.program._abstract import short_signature
from autotune.record._budget import Share, quick_default, spend
from autotune.record._inputs import Skip, build_inputs
from autotune.select._objective import Objective, Override


@dataclass
class Replayed:
    """What `tune_recorded` did with one recorded signature.

    Attributes:
        record: the pending record.
        status: ``"tuned"``, ``"tuned before"`` (an entry for this device covers it), ``"skipped"``
            (it cannot be replayed) or ``"failed"`` (tuning raised an `AutotuneError`).
        reason: why it was skipped or failed, else None.
        inputs: ``"recorded values"`` or ``"synthesized"`` (None when skipped before building them).
        result: the `TuneResult` when tuned.
        share: its part of ``time_budget`` (planned, given, used), when there was one.
    """

    record: PendingRecord
    status: str
    reason: str | None = None
    inputs: str | None = None
    result: Any = None
    share: Share | None = None


@dataclass(frozen=True)
class PendingStatus:
    """One row of ``autotune pending``: the record, whether this device has a tuned entry for
    its exact key, and whether its values are stored (their files present)."""

    record: PendingRecord
    tuned_here: bool
    values_stored: bool


# ------------------------------------------------------------------ import


def _add_root(module: str, file: str) -> None:
    """Put the folder ``module`` is importable from (given its file) first on sys.path."""
    root = os.path.dirname(os.path.abspath(file))
    for _ in range(module.count(".") + (os.path.basename(file) == "__init__.py")):
        root = os.path.dirname(root)
    if root not in sys.path:
        sys.path.insert(0, root)


def _load_script(file: str, name: str):
    """Import a script under its module name (its folder first on sys.path), as study files are."""
    path = os.path.abspath(file)
    mod = sys.modules.get(name)
    if mod is not None and os.path.realpath(getattr(mod, "__file__", "") or "") == os.path.realpath(path):
        return mod
    _add_root(name, path)
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod
    try:
        spec.loader.exec_module(mod)
    except BaseException:
        sys.modules.pop(name, None)
        raise
    return mod


def import_recorded(location: dict[str, Any]) -> Any:
    """The `Autotuned` behind a recorded location: the module imported by name (its recorded
    file's folder, then the working directory, on sys.path), a script loaded from its file
    when it is still there.

    Raises:
        Skip: it no longer imports, or is no longer an ``@at.autotuned`` function.
    """
    module, qualname, file = location.get("module"), location.get("qualname"), location.get("file")
    if not module or not qualname:
        raise Skip("the record names no module and function to import")
    here = file if file and os.path.isfile(file) else None
    try:
        if location.get("main") and here and "." not in module:
            mod = _load_script(here, module)
        else:
            if here:
                _add_root(module, here)
            elif os.getcwd() not in sys.path:
                sys.path.append(os.getcwd())
            mod = importlib.import_module(module)
        obj = mod
        for part in qualname.split("."):
            obj = getattr(obj, part)
    except (Exception, SystemExit) as e:
        raise Skip(f"{module}:{qualname} no longer imports ({type(e).__name__}: {e})") from None
    ctl = controller(obj)
    if ctl is None:
        raise Skip(f"{module}:{qualname} is no longer an @at.autotuned function")
    return ctl


# ------------------------------------------------------------------ rebuild and check

_TUNE_OPTIONS = frozenset(FN_TUNE)  # fn.tune's named options


def rebuild(rec: PendingRecord, values_dir: str) -> tuple[Any, tuple, dict, str]:
    """Import the function and build its inputs; check they trace to the recorded program
    and signature. Returns ``(function, args, kwargs, inputs)``.

    Raises:
        Skip: the record cannot be replayed, no longer imports, its options, program or
            signature changed, or its inputs cannot be rebuilt.
    """
    if not rec.replayable:
        raise Skip(f"it cannot be replayed: {rec.why_not}")
    ctl = import_recorded(rec.location)
    if ctl.key != rec.function_key:
        raise Skip(f"{rec.location.get('module')}:{rec.location.get('qualname')} now has the key {ctl.key!r}")
    then = {k: v for k, v in rec.options.items() if k != "not_recorded"}
    now = {k: v for k, v in jit_options(ctl.jit_kwargs).items() if k != "not_recorded"}
    if then != now:
        raise Skip(f"its jit options changed since it was recorded ({then} then, {now} now)")
    clash = sorted(_TUNE_OPTIONS & set(rec.abstract.get("kwargs", {})))
    if clash:
        raise Skip(f"its keyword argument {clash[0]!r} has the name of a tune() option; tune it with a study file")
    args, kwargs, inputs = build_inputs(rec, values_dir)
    try:
        program, signature = _keys.program_key(ctl.fun, args, kwargs, ctl.jit_kwargs)
    except Exception as e:
        raise Skip(f"it no longer traces on the recorded inputs ({error_text(e)})") from None
    if program.fingerprint != rec.fingerprint:
        upgrade = rec.device.get("jax") != _host.target_device().get("jax")
        raise Skip(
            f"the program changed since it was recorded (fingerprint {rec.fingerprint[:10]} then, "
            f"{program.fingerprint[:10]} now{'; a jax upgrade changes it too' if upgrade else ''}); run "
            "the program with AUTOTUNE_RECORD=1 again to record it"
        )
    if signature != rec.signature:
        raise Skip(
            f"the rebuilt inputs have the signature {signature[-80:]!r}, not the recorded {rec.signature[-80:]!r}"
        )
    return ctl, args, kwargs, inputs


def select(records: list[PendingRecord], device_key: str) -> list[PendingRecord]:
    """One record per (function, fingerprint, signature): one with values first, then the one
    recorded on this device, then the oldest."""
    best: dict[tuple, PendingRecord] = {}
    for rec in records:
        k = rec.key[:3]
        rank = lambda r: (not r.value_files, r.device_key != device_key)  # noqa: E731
        if k not in best or rank(rec) < rank(best[k]):
            best[k] = rec
    return list(best.values())


def describe_record(rec: PendingRecord) -> str:
    """``app:step (f32[16], 8)``: the function and its short signature, for one-line messages."""
    return f"{rec.function_key} {short_signature(rec.abstract)}"


# ------------------------------------------------------------------ tune and list


def tune_recorded(
    cache: Cache,
    options: TuneOptions,
    *,
    function: str | None = None,
    override: Override | None = None,
    say: Callable[[str], None] = print,
    cache_flag: str | None = None,
    time_budget: float | None = None,
    show_plan: Callable[[list[Share], float, float], None] | None = None,
) -> list[Replayed]:
    """Tune every recorded signature (of ``function`` when given) on this machine's device.

    Arguments:
        cache: where the records are read from and the winners written to.
        options: how each signature is tuned (:class:`autotune.TuneOptions`: ``n_trials`` and
            ``timeout`` per signature, ``sampler``, ``storage``, ``timing``...).
        function: only this function key; its records are tuned even when an entry covers
            them already (without it, such records are ``"tuned before"``).
        override: the objective figures the command says, laid over each recorded objective (None: none).
        say: prints the one-line messages (skips, what is tuned).
        cache_flag: the ``--cache`` text to put into the stored re-tune command.
        time_budget: seconds for all, split by calls × default runtime (`autotune.record._budget.spend`).
        show_plan: called with the plan before any tuning (`autotune.record._budget.spend`).

    Returns one `Replayed` per distinct recorded signature."""
    override = override or Override()
    device = _host.target_device()
    device_key = _keys.device_key(device)
    out, ready = [], []
    for rec in select(cache.pending(function), device_key):
        goal = override.over(Objective.from_dict(rec.objective))
        calls, cw, rw = goal.expected_calls, goal.compile_weight, goal.runtime_weight
        said = override.keywords()
        # processes, the compilation cache and the memory budget: the recorded program's, or the command's
        more = {
            k: getattr(goal, k)
            for k in ("processes", "compilation_cache", "max_memory")
            if said[k] is not None or k in rec.objective
        }
        if function is None:  # its budget's entry (a fraction of the memory is resolved when tuned)
            budgeted = _keys.device_key(_keys.under_budget(device, goal.budget_bytes))
            entry = cache.lookup(rec.function_key, rec.fingerprint, rec.signature, budgeted)
            held = None if entry is None else entry.goal
            charges = (cw, rw, more.get("processes", 1))
            if held and entry.covers(calls) and (held.compile_weight, held.runtime_weight, held.processes) == charges:
                say(f"tuned before: {describe_record(rec)} (autotune best --function {shlex.quote(rec.function_key)})")
                out.append(Replayed(rec, "tuned before"))
                continue
        try:
            ctl, args, kwargs, inputs = rebuild(rec, cache.values_dir)
        except Skip as e:
            say(f"skipped {describe_record(rec)}: {' '.join(str(e).split())}")
            out.append(Replayed(rec, "skipped", str(e)))
            continue
        fn = ctl.with_options(expected_calls=calls, compile_weight=cw, runtime_weight=rw, cache=cache, **more)
        ready.append((rec, fn, args, kwargs, inputs))

    def tune_one(item: tuple, seconds: float | None = None) -> Replayed:
        rec, fn, args, kwargs, inputs = item
        argv = ["tune", "--recorded", "--function", rec.function_key] + (["--cache", cache_flag] if cache_flag else [])
        plumbing, opts = Plumbing(retune=command_retune(argv)), options.replace(timeout=seconds or options.timeout)
        say(f"tuning {describe_record(rec)} on {inputs} (expected_calls={fn.expected_calls:g})")
        try:
            return Replayed(rec, "tuned", inputs=inputs, result=run_tune(fn, (args, kwargs), opts, plumbing))
        except AutotuneError as e:  # e.g. no config compiled: the next record still gets its turn
            say(f"failed {describe_record(rec)}: {' '.join(str(e).split())}")
            return Replayed(rec, "failed", str(e), inputs)

    if time_budget is None:
        return out + [tune_one(item) for item in ready]

    def measured(item: tuple) -> Share:  # the default measured once: its share of the budget
        rec, fn, args, kwargs, _ = item
        return quick_default(fn, args, kwargs, short_signature(rec.abstract), options.sampling)

    for _, share, done in spend(time_budget, ready, measured, tune_one, show_plan):
        done.share = share
        out.append(done)
    return out


def pending_status(cache: Cache) -> list[PendingStatus]:
    """Every pending record, whether this device has a tuned entry for its exact key, and
    whether its value files are there."""
    device = _host.target_device()
    rows = []
    for rec in cache.pending():
        device_key = _keys.device_key(_keys.under_budget(device, rec.device.get("max_memory")))  # its budget's entry
        tuned = cache.lookup(rec.function_key, rec.fingerprint, rec.signature, device_key) is not None
        stored = bool(rec.value_files) and all(
            os.path.isfile(os.path.join(cache.values_dir, f)) for f in rec.value_files
        )
        rows.append(PendingStatus(rec, tuned, stored))
    return rows
