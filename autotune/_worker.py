"""Run trials in a worker process, so a trial that hangs, crashes or runs out of
memory costs one trial and not the study.

The parent (:class:`WorkerRunner`) and the child (``python -m autotune._worker``)
talk in JSON lines over the child's stdin and a private copy of its stdout
(anything the user's code prints goes to stderr). Arrays cross as base64
``.npy`` with ``allow_pickle=False``; nothing is ever pickled.

Two ways to get the function into the child:

* study-file mode (:meth:`WorkerRunner.for_study_file`): the child imports the
  study file and traces, lowers, compiles and runs example ``index`` itself;
* Python mode (``WorkerRunner(fn, args, ...)``, what :func:`autotune.tune`
  builds): the parent traces and lowers ``jax.jit(with_config(fn, config))``,
  exports it with ``jax.export`` and sends the serialized program; the child
  deserializes, compiles and runs it. Closures work, since only the lowered
  program crosses. Programs ``jax.export`` cannot serialize (host callbacks such
  as ``jax.debug.print`` / ``pure_callback``, custom calls without a stability
  guarantee, multi-device shardings) are measured in-process instead, with one warning.

The child is kept warm across trials while healthy. A trial that exceeds its
time limit or its compile budget has the child's process group killed; a child
that died (signal, abort, out of memory) is replaced on the next trial. Failures
surface as :class:`TrialFailed` with ``state`` in ``timeout | crashed | oom |
pruned | error``.

The memory cap is ``RLIMIT_DATA`` in the child: it bounds heap and anonymous
mappings, which is where XLA's compiler and the CPU runtime allocate, and it
turns an over-allocation into XLA's ``RESOURCE_EXHAUSTED`` error or a
``MemoryError``. ``RLIMIT_AS`` is not usable: XLA reserves large virtual ranges
at start-up (the child segfaults while importing jaxlib under a 1 GiB
``RLIMIT_AS``, and CUDA reserves far more).
"""

from __future__ import annotations

import base64
import contextlib
import hashlib
import inspect
import io
import json
import os
import select
import signal
import subprocess
import sys
import tempfile
import threading
import time
import warnings
import weakref
from collections.abc import Callable
from typing import Any

import numpy as np

from ._config import Config
from ._errors import AutotuneError, StudyError

STATES = ("timeout", "crashed", "oom", "pruned", "error")
_PROTOCOL = 1
_CARRIED_JIT_OPTIONS = {"static_argnums", "static_argnames", "donate_argnums", "donate_argnames",
                        "keep_unused", "inline", "compiler_options"}
_OOM_WORDS = ("resource_exhausted", "out of memory", "bad_alloc", "cannot allocate memory", "memoryerror",
              "failed to allocate")


from ._runner import TrialFailed  # noqa: E402  (TEMPORARY: the worker package replaces this file)


# --------------------------------------------------------------------------- arrays


def encode_array(x: Any) -> dict[str, Any]:
    """One array as JSON: its dtype name and base64 ``.npy`` bytes (no pickle).

    dtypes NumPy cannot describe in an ``.npy`` header (``bfloat16``, ``float8_*``,
    ``int4``...) travel as unsigned integers of the same width plus their name.
    """
    a = np.asarray(x)
    if a.dtype.kind == "O":
        raise TypeError("object arrays cannot be sent to the worker")
    raw = a
    try:
        native = np.dtype(a.dtype.str) == a.dtype
    except TypeError:
        native = False
    if not native:
        raw = a.view(f"u{a.dtype.itemsize}")
    buf = io.BytesIO()
    np.save(buf, raw, allow_pickle=False)  # np.ascontiguousarray would turn a 0-d array into 1-d
    return {"dtype": a.dtype.name, "npy": base64.b64encode(buf.getvalue()).decode("ascii")}


def _resolve_dtype(name: str) -> np.dtype:
    try:
        return np.dtype(name)
    except TypeError:
        import ml_dtypes

        return np.dtype(getattr(ml_dtypes, name))


def decode_array(d: dict[str, Any]) -> np.ndarray:
    a = np.load(io.BytesIO(base64.b64decode(d["npy"])), allow_pickle=False)
    want = _resolve_dtype(d["dtype"])
    return a if a.dtype == want else a.view(want)


def _digest(leaves: list[np.ndarray]) -> str:
    h = hashlib.sha256()
    for a in leaves:
        a = np.asarray(a)
        h.update(f"{a.dtype.name}{a.shape}".encode())
        h.update(a.tobytes())
    return h.hexdigest()[:16]


# --------------------------------------------------------------------------- parent


def _kill_group(proc: subprocess.Popen) -> None:
    """SIGKILL the worker's whole process group and reap it."""
    if proc.poll() is None:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            try:
                proc.kill()
            except ProcessLookupError:
                pass
    try:
        proc.wait(timeout=30)
    except subprocess.TimeoutExpired:  # pragma: no cover - a process that survives SIGKILL
        pass
    for stream in (proc.stdin, proc.stdout):
        try:
            if stream is not None:
                stream.close()
        except OSError:
            pass


def _signal_name(num: int) -> str:
    try:
        return signal.Signals(num).name
    except ValueError:
        return f"signal {num}"


_SIGNAL_WORDS = {"SIGSEGV": "segmentation fault", "SIGABRT": "abort", "SIGBUS": "bus error",
                 "SIGILL": "illegal instruction", "SIGFPE": "floating-point exception"}


class _Dead(Exception):
    """The worker closed its end: it died."""


class WorkerRunner:
    """Measures configs in a worker process with a time limit and a memory cap.

    Same interface as the in-process runner of :func:`autotune.tune`:
    ``measure(config, *, compile_budget_s=None) -> Measurement`` (``.outputs`` holds
    the outputs as NumPy leaves) and ``close()``.

    Arguments:
        fn, args, kwargs, jit_kwargs: the function, its example inputs and the
            ``jax.jit`` options, as for :func:`autotune.measure`.
        timing: runtime sampling options (``warmup``, ``min_reps``, ``max_reps``, ``target_s``).
        trial_timeout: seconds one trial (trace + lower + compile + run) may take; None
            for no limit. Over it, the worker is killed: ``TrialFailed("timeout")``.
        memory_gb: ``RLIMIT_DATA`` of the worker in GiB, or None.
        isolate: ``"auto"`` measures in-process, with one warning, a program the worker
            cannot take; ``True`` raises :class:`StudyError` instead.
        startup_timeout: seconds to wait for a new worker to import JAX.
        prune_grace_s: a trial over its compile budget is killed once it is over budget *and*
            its compile has run at least this long. None (default) uses the time the last
            worker took to start: killing a compile that would finish sooner than a new
            worker starts would cost more wall time than it saves (0: kill at the budget).
    """

    def __init__(self, fn: Callable | None, args: tuple = (), kwargs: dict | None = None,
                 jit_kwargs: dict | None = None, timing: dict | None = None, *,
                 trial_timeout: float | None = None, memory_gb: float | None = None,
                 isolate: bool | str = "auto", startup_timeout: float = 300.0,
                 prune_grace_s: float | None = None, python: str | None = None):
        if trial_timeout is not None and not trial_timeout > 0:
            raise StudyError(f"trial_timeout={trial_timeout!r} must be a number of seconds > 0, or None.")
        if memory_gb is not None and not memory_gb > 0:
            raise StudyError(f"trial_memory_gb={memory_gb!r} must be a number of GiB > 0, or None.")
        if isolate not in ("auto", True):
            raise StudyError(f"WorkerRunner(isolate={isolate!r}): use 'auto' or True.")
        self.fn, self.args, self.kwargs = fn, tuple(args), dict(kwargs or {})
        self.jit_kwargs = dict(jit_kwargs or {})
        self.timing = {k: v for k, v in dict(timing or {}).items()
                       if k in ("warmup", "min_reps", "max_reps", "target_s")}
        self.trial_timeout, self.memory_gb = trial_timeout, memory_gb
        self.strict = isolate is True
        self.startup_timeout = startup_timeout
        self.prune_grace_s = prune_grace_s
        self.startup_s: float | None = None  # how long the last worker took to become ready
        self.python = python or sys.executable
        self.mode = "export"
        self.study_file: str | None = None
        self.index = 0
        self._starts = 0
        self.fallback_reason: str | None = None
        self._proc: subprocess.Popen | None = None
        self._finalizer = None
        self._stderr = None
        self._buf = b""
        self._ready = False
        self._loaded = False       # the current worker has the function / the args
        self._ever_ready = False
        self._trial_id = 0
        self._args_message: bytes | None = None
        self._input_digest: str | None = None
        self._closed = False
        self._interrupted = False
        if fn is not None:
            reason = self._unsupported_jit_options()
            if reason:
                self._fall_back(reason)

    @classmethod
    def for_study_file(cls, path: str | os.PathLike, index: int = 0, **options: Any) -> WorkerRunner:
        """A runner whose worker imports the study file itself and measures ``examples()[index]``.

        The whole trial (trace, lower, compile, run) runs in the worker; no array crosses
        except the outputs. ``options`` are those of :class:`WorkerRunner`
        (``timing``, ``trial_timeout``, ``memory_gb``, ``startup_timeout``, ``python``).
        """
        if not os.path.isfile(path):
            raise StudyError(f"Study file {os.fspath(path)!r} does not exist.")
        runner = cls(None, **options)
        runner.mode = "study"
        runner.study_file = os.path.abspath(os.fspath(path))
        runner.index = int(index)
        return runner

    # -- public ------------------------------------------------------------------------
    @property
    def pid(self) -> int | None:
        """The current worker's process id, or None when none is running."""
        return self._proc.pid if self._proc is not None and self._proc.poll() is None else None

    @property
    def restarts(self) -> int:
        """How many workers were started after the first (one per crash, kill or replacement)."""
        return max(0, self._starts - 1)

    @property
    def isolated(self) -> bool:
        """False once this runner measures in-process (see ``fallback_reason``)."""
        return self.fallback_reason is None

    def measure(self, config: Config | dict | None, *, compile_budget_s: float | None = None):
        """Measure ``config`` in the worker.

        Arguments:
            config: the config.
            compile_budget_s: stop the trial as ``"pruned"`` once its trace + lower +
                compile seconds reach this (the caller's best cost / compile weight).

        Raises:
            TrialFailed: timeout, crash, out of memory, pruned, or the config raised.
        """
        if self._closed:
            raise StudyError("This WorkerRunner is closed.")
        config = Config.from_dict(config)
        if self.fallback_reason is not None:
            return self._measure_in_process(config)
        with self._sigint_latch():
            try:
                self._check_interrupt()
                if self.mode == "study":
                    result = self._measure_study(config, compile_budget_s)
                else:
                    result = self._measure_export(config, compile_budget_s)
                self._check_interrupt()
                return result
            except (TrialFailed, StudyError):
                raise
            except BaseException:
                # Interrupted (Ctrl-C) or broken mid-protocol: the worker's state is unknown.
                self._interrupted = False
                self._discard()
                raise

    @contextlib.contextmanager
    def _sigint_latch(self):
        """Remember a Ctrl-C while measuring, so it is not lost.

        Python raises KeyboardInterrupt wherever the main thread is when the signal is
        handled; inside a garbage-collector callback (JAX registers one) it is printed as
        "Exception ignored" and dropped. The latch re-raises it at the next check.
        """
        if threading.current_thread() is not threading.main_thread():
            yield
            return
        previous = signal.getsignal(signal.SIGINT)
        if previous in (signal.SIG_IGN, signal.SIG_DFL, None):
            yield
            return

        def handler(signum, frame):
            self._interrupted = True
            previous(signum, frame)

        signal.signal(signal.SIGINT, handler)
        try:
            yield
        finally:
            signal.signal(signal.SIGINT, previous)

    def _check_interrupt(self) -> None:
        if self._interrupted:
            self._interrupted = False
            raise KeyboardInterrupt

    def close(self) -> None:
        """Stop the worker (politely, then by SIGKILL) and reap it. Idempotent."""
        self._closed = True
        proc = self._proc
        if proc is not None and proc.poll() is None:
            try:
                proc.stdin.write(b'{"op": "exit"}\n')
                proc.stdin.flush()
                proc.wait(timeout=2)
            except (OSError, ValueError, subprocess.TimeoutExpired):
                pass
        self._discard()

    def __enter__(self) -> WorkerRunner:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    # -- in-process fallback --------------------------------------------------------------
    def _unsupported_jit_options(self) -> str | None:
        extra = sorted(set(self.jit_kwargs) - _CARRIED_JIT_OPTIONS)
        if extra:
            return f"the jax.jit option(s) {extra} cannot be carried to a worker process"
        return None

    def _fall_back(self, reason: str) -> None:
        if self.strict:
            self._discard()
            raise StudyError(f"Cannot measure this function in a worker process: {reason}. "
                             "Pass isolate='auto' to measure it in-process, or isolate=False.")
        self.fallback_reason = reason
        limits = [n for n, v in (("trial_timeout", self.trial_timeout), ("trial_memory_gb", self.memory_gb)) if v]
        lost = f"; {' and '.join(limits)} and compile-budget pruning do not apply" if limits else \
            "; compile-budget pruning does not apply"
        warnings.warn(f"autotune: measuring in-process, without isolation: {reason}{lost}.",
                      RuntimeWarning, stacklevel=4)
        self._discard()

    def _measure_in_process(self, config: Config):
        from ._measure import measure

        if self.fn is None:  # study-file mode never falls back
            raise StudyError(f"The worker for {self.study_file} is unavailable: {self.fallback_reason}")
        return measure(self.fn, self.args, self.kwargs, config, jit_kwargs=self.jit_kwargs,
                       keep_outputs=True, **self.timing)

    # -- Python mode: jax.export ----------------------------------------------------------
    def _measure_export(self, config: Config, budget: float | None):
        import jax

        from . import _compat
        from ._measure import Measurement, _dynamic_args
        from ._rewrite import with_config

        self._spawn()  # starts importing JAX in the child while the parent traces
        started = time.monotonic()
        with _compat.no_persistent_cache():
            _compat.clear_jax_caches()
            try:
                jitted = jax.jit(with_config(self.fn, config), **self.jit_kwargs)
                t0 = time.perf_counter()
                traced = jitted.trace(*self.args, **self.kwargs)
                trace_s = time.perf_counter() - t0
                self._check_interrupt()
                self._check_parent_stage(budget, trace_s, started, "tracing")
                t0 = time.perf_counter()
                traced.lower()
                lower_s = time.perf_counter() - t0
                self._check_interrupt()
                self._check_parent_stage(budget, trace_s + lower_s, started, "lowering")
            except (TrialFailed, KeyboardInterrupt):
                raise
            except Exception as exc:  # the config does not trace or lower: a result, the worker stays
                raise TrialFailed("error", f"{type(exc).__name__}: {exc}"[:2000]) from exc
            try:
                exported = jax.export.export(jitted)(*self.args, **self.kwargs)
                program = exported.serialize()
            except Exception as exc:
                why = f"jax.export cannot serialize it ({type(exc).__name__}: {str(exc).splitlines()[0][:300]})"
                if isinstance(exc, ImportError):
                    why += "; `pip install flatbuffers` enables worker isolation"
                self._fall_back(why)
                return self._measure_in_process(config)
        if getattr(exported, "nr_devices", 1) != 1:
            self._fall_back(f"the program uses {exported.nr_devices} devices; the worker runs single-device programs")
            return self._measure_in_process(config)
        dyn_args, dyn_kwargs = _dynamic_args(self.fn, self.args, self.kwargs, self.jit_kwargs)
        leaves, tree = jax.tree_util.tree_flatten((dyn_args, dyn_kwargs))
        if tree != exported.in_tree or len(leaves) != len(exported.in_avals):
            self._fall_back("its arguments do not flatten like the exported program's inputs")
            return self._measure_in_process(config)
        if self._args_message is None:
            arrays = [np.asarray(x, dtype=aval.dtype) for x, aval in zip(leaves, exported.in_avals)]
            self._args_message = (json.dumps({"op": "load_args", "leaves": [encode_array(a) for a in arrays]})
                                  + "\n").encode()
        request = {
            "op": "trial", "mode": "export",
            "program": base64.b64encode(bytes(program)).decode("ascii"),
            "donate": self._donated_leaves(),
            "compiler_options": self.jit_kwargs.get("compiler_options"),
            "trace_s": trace_s, "lower_s": lower_s,
            "timing": self.timing, "keep_outputs": True,
        }
        done = self._run(request, budget, started, parent_s=trace_s + lower_s)
        if done.get("fallback"):
            return self._measure_in_process(config)
        m = done["measurement"]
        outputs = [decode_array(d) for d in done.get("outputs") or []]
        if outputs or exported.out_tree.num_leaves == 0:
            outputs = jax.tree_util.tree_unflatten(exported.out_tree, outputs)
        return Measurement(
            trace_s=trace_s, lower_s=lower_s, compile_s=float(m["compile_s"]), run_s=float(m["run_s"]),
            run_iqr_s=float(m["run_iqr_s"]), reps=int(m["reps"]), config=config,
            memory=dict(m.get("memory") or {}), flops=m.get("flops"), outputs=outputs,
        )

    def _check_parent_stage(self, budget: float | None, elapsed_compile: float, started: float, stage: str) -> None:
        if budget is not None and elapsed_compile >= budget:
            raise TrialFailed("pruned", (
                f"pruned after {stage}: trace+lower already took {elapsed_compile:.3g} s, over the compile "
                f"budget of {budget:.3g} s (best cost / compile weight), so this config cannot win"))
        spent = time.monotonic() - started
        if self.trial_timeout is not None and spent >= self.trial_timeout:
            raise TrialFailed("timeout", (
                f"{stage} in the parent took {spent:.3g} s, over the trial timeout of {self.trial_timeout:g} s "
                "(trace and lower run in the parent and are checked when they finish)"))

    def _donated_leaves(self) -> list[int]:
        """Flat indices of the dynamic leaves ``jax.jit`` would donate (donate_argnums/argnames
        resolved through the signature as jit does; static arguments are not leaves)."""
        import jax

        from ._measure import _dynamic_args

        nums = self.jit_kwargs.get("donate_argnums", ()) or ()
        nums = {nums} if isinstance(nums, int) else set(nums)
        names = self.jit_kwargs.get("donate_argnames", ()) or ()
        names = {names} if isinstance(names, str) else set(names)
        if not nums and not names:
            return []
        n = len(self.args)
        try:
            params = list(inspect.signature(self.fn).parameters.values())
        except (TypeError, ValueError):
            params = []
        positional = [p.name for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
        nums = {i % n if n and i < 0 else i for i in nums}
        names |= {positional[i] for i in nums if i < len(positional)}
        nums |= {i for i, name in enumerate(positional) if name in names}
        # Which positions and names survive as dynamic arguments, in order.
        kept, kept_kw = _dynamic_args(self.fn, tuple(range(n)), {k: k for k in self.kwargs}, self.jit_kwargs)
        out, k = [], 0
        for i in kept:
            count = len(jax.tree_util.tree_leaves(self.args[i]))
            if i in nums:
                out.extend(range(k, k + count))
            k += count
        for name in kept_kw:
            count = len(jax.tree_util.tree_leaves(self.kwargs[name]))
            if name in names:
                out.extend(range(k, k + count))
            k += count
        return out

    # -- study-file mode ------------------------------------------------------------------
    def _measure_study(self, config: Config, budget: float | None):
        from ._measure import Measurement

        self._spawn()
        started = time.monotonic()
        request = {"op": "trial", "mode": "study", "config": config.to_dict(), "timing": self.timing,
                   "keep_outputs": True}
        done = self._run(request, budget, started, parent_s=0.0)
        m = done["measurement"]
        outputs = [decode_array(d) for d in done.get("outputs") or []]
        return Measurement(
            trace_s=float(m["trace_s"]), lower_s=float(m["lower_s"]), compile_s=float(m["compile_s"]),
            run_s=float(m["run_s"]), run_iqr_s=float(m["run_iqr_s"]), reps=int(m["reps"]), config=config,
            memory=dict(m.get("memory") or {}), flops=m.get("flops"), outputs=outputs,
        )

    # -- the worker process ---------------------------------------------------------------
    def _spawn(self) -> None:
        """Start a worker if none is alive (without waiting for it to be ready)."""
        if self._proc is not None and self._proc.poll() is None:
            return
        if self._proc is not None:
            self._discard()
        self._starts += 1
        import autotune

        root = os.path.dirname(os.path.dirname(os.path.abspath(autotune.__file__)))
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join([root] + [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p])
        env.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")  # the parent may hold the GPU too
        env.update(_jax_env())
        cmd = [self.python, "-m", "autotune._worker", "--parent", str(os.getpid())]
        if self.memory_gb is not None:
            cmd += ["--memory-bytes", str(int(self.memory_gb * 2**30))]
        self._stderr = tempfile.TemporaryFile(prefix="autotune-worker-", suffix=".log")
        self._spawned_at = time.monotonic()
        self._proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self._stderr,
                                      env=env, start_new_session=True, close_fds=True)
        self._finalizer = weakref.finalize(self, _kill_group, self._proc)
        self._buf = b""
        self._ready = False
        self._loaded = False

    def _discard(self) -> None:
        """Kill and reap the current worker (the next trial starts a new one)."""
        proc, self._proc = self._proc, None
        if proc is not None:
            _kill_group(proc)
        if self._finalizer is not None:
            self._finalizer.detach()
            self._finalizer = None
        if self._stderr is not None:
            self._stderr.close()
            self._stderr = None
        self._ready = self._loaded = False

    def _await_ready(self) -> None:
        if self._ready:
            return
        deadline = time.monotonic() + self.startup_timeout
        try:
            event = self._read(deadline)
        except _Dead:
            reason = self._death_reason("while starting")
            first = not self._ever_ready
            self._discard()
            if first and self.fn is not None:
                self._fall_back(f"the worker process could not start ({reason[1]})")
                raise _FellBack() from None
            raise TrialFailed("crashed" if reason[0] != "oom" else "oom",
                              f"the worker process could not start: {reason[1]}") from None
        if event is None:
            self._discard()
            raise TrialFailed("timeout", f"the worker process did not import JAX within {self.startup_timeout:g} s")
        if event.get("event") != "ready" or event.get("protocol") != _PROTOCOL:
            self._discard()
            raise TrialFailed("crashed", f"the worker process spoke an unexpected protocol: {str(event)[:200]}")
        mine = _platform()
        if event.get("platform") != mine:
            self._discard()
            why = f"the worker process runs on {event.get('platform')!r}, this process on {mine!r}"
            if self.fn is None:
                raise TrialFailed("error", why)
            self._fall_back(why)
            raise _FellBack()
        self._ready = self._ever_ready = True
        self.startup_s = time.monotonic() - self._spawned_at

    def _load(self) -> None:
        if self._loaded:
            return
        if self.mode == "study":
            self._send({"op": "load_study", "path": self.study_file, "index": self.index})
        else:
            self._send_bytes(self._args_message)
        event = self._expect_reply(time.monotonic() + self.startup_timeout, "loading the inputs")
        if event.get("event") == "error":
            self._discard()
            raise TrialFailed("error", f"{event.get('type')}: {event.get('message')}")
        digest = event.get("digest")
        if self._input_digest is None:
            self._input_digest = digest
        elif digest != self._input_digest:
            self._discard()
            raise TrialFailed("error", (
                "the restarted worker got other inputs than the first one (examples() is not deterministic; "
                "seed its random inputs), so its outputs cannot be compared"))
        self._loaded = True

    def _expect_reply(self, deadline: float, what: str) -> dict[str, Any]:
        try:
            event = self._read(deadline)
        except _Dead:
            state, why = self._death_reason(what)
            self._discard()
            raise TrialFailed(state, why) from None
        if event is None:
            self._discard()
            raise TrialFailed("timeout", f"the worker did not answer while {what}")
        return event

    def _run(self, request: dict[str, Any], budget: float | None, started: float, parent_s: float) -> dict:
        """Send one trial and follow its events to the result, enforcing time limits."""
        setup = time.monotonic()
        try:
            self._await_ready()
            self._load()
        except _FellBack:
            return {"fallback": True}
        started += time.monotonic() - setup  # starting a worker is not the trial's time
        self._trial_id += 1
        request["id"] = self._trial_id
        self._send(request)
        phase = "waiting"
        phase_started = time.monotonic()
        compile_deadline = None
        grace = self.prune_grace_s if self.prune_grace_s is not None else (self.startup_s or 0.0)
        trace_s = lower_s = 0.0
        while True:
            deadlines = []
            if self.trial_timeout is not None:
                deadlines.append((started + self.trial_timeout, "timeout"))
            if compile_deadline is not None:
                deadlines.append((compile_deadline, "pruned"))
            deadline, kind = min(deadlines) if deadlines else (None, None)
            try:
                event = self._read(deadline)
            except _Dead:
                state, why = self._death_reason(f"during {phase}")
                self._discard()
                raise TrialFailed(state, why) from None
            now = time.monotonic()
            if event is None:
                pid = self._proc.pid if self._proc is not None else "?"
                self._discard()
                if kind == "pruned":
                    spent = parent_s + trace_s + lower_s + (now - phase_started if phase == "compile" else 0.0)
                    waited = (f" (killed once it had also run {grace:.3g} s, as long as starting a new worker "
                              "takes)") if grace > budget else ""
                    raise TrialFailed("pruned", (
                        f"stopped during {phase} after {spent:.3g} s of trace+lower+compile, over the compile budget "
                        f"of {budget:.3g} s (best cost / compile weight), so this config can no longer win{waited}; "
                        f"worker pid {pid} killed"))
                raise TrialFailed("timeout", (
                    f"over the trial timeout of {self.trial_timeout:g} s during {phase} "
                    f"({now - started:.3g} s in all); worker pid {pid} killed"))
            name = event.get("event")
            if event.get("id") not in (None, request["id"]):
                continue
            if name == "started":
                phase, phase_started = ("trace" if request["mode"] == "study" else "load"), now
                if budget is not None and request["mode"] == "study":
                    compile_deadline = now + max(budget, grace)
            elif name == "compile_start":
                trace_s, lower_s = float(event.get("trace_s", 0.0)), float(event.get("lower_s", 0.0))
                if request["mode"] == "export":
                    trace_s = lower_s = 0.0  # the parent's, already in parent_s
                phase, phase_started = "compile", now
                if budget is not None:
                    compile_deadline = now + max(budget - parent_s - trace_s - lower_s, grace - trace_s - lower_s)
            elif name == "compile_end":
                phase, phase_started, compile_deadline = "run", now, None
            elif name == "result":
                return event
            elif name == "error":
                oom = bool(event.get("oom"))
                text = f"{event.get('type')}: {event.get('message')}"
                if oom:
                    self._discard()  # a worker that ran out of memory is replaced
                    cap = f" (memory cap {self.memory_gb:g} GiB)" if self.memory_gb else ""
                    raise TrialFailed("oom", f"ran out of memory during {event.get('phase', phase)}{cap}: {text}"[:2000])
                raise TrialFailed("error", text[:2000])

    def _send(self, message: dict[str, Any]) -> None:
        self._send_bytes((json.dumps(message) + "\n").encode())

    def _send_bytes(self, data: bytes) -> None:
        try:
            self._proc.stdin.write(data)
            self._proc.stdin.flush()
        except (BrokenPipeError, OSError, ValueError):
            state, why = self._death_reason("while receiving a request")
            self._discard()
            raise TrialFailed(state, why) from None

    def _read(self, deadline: float | None) -> dict[str, Any] | None:
        """The next event line, None at the deadline; raises _Dead at end of file."""
        fd = self._proc.stdout.fileno()
        while b"\n" not in self._buf:
            self._check_interrupt()
            timeout = None if deadline is None else max(0.0, deadline - time.monotonic())
            ready, _, _ = select.select([fd], [], [], timeout)
            if not ready:
                return None
            chunk = os.read(fd, 1 << 20)
            if not chunk:
                raise _Dead()
            self._buf += chunk
        line, self._buf = self._buf.split(b"\n", 1)
        try:
            return json.loads(line)
        except ValueError:
            return {"event": "noise", "text": line[:200].decode("utf-8", "replace")}

    def _stderr_tail(self, n: int = 1500) -> str:
        if self._stderr is None:
            return ""
        try:
            self._stderr.flush()
            size = self._stderr.seek(0, os.SEEK_END)
            self._stderr.seek(max(0, size - n))
            text = self._stderr.read().decode("utf-8", "replace")
        except (OSError, ValueError):
            return ""
        lines = [ln for ln in text.splitlines() if ln.strip()]
        return " | ".join(lines[-4:])[-600:]

    def _death_reason(self, when: str) -> tuple[str, str]:
        """(state, reason) for a worker that closed its end."""
        proc = self._proc
        rc = None
        if proc is not None:
            try:
                rc = proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                rc = None
        tail = self._stderr_tail()
        pid = proc.pid if proc is not None else "?"
        said = f"; its last words: {tail}" if tail else ""
        oom_words = any(w in tail.lower() for w in _OOM_WORDS)
        if rc is not None and rc < 0:
            sig = _signal_name(-rc)
            if sig == "SIGKILL":
                return "oom", (f"the worker (pid {pid}) was killed by SIGKILL {when}, which on Linux is almost "
                               f"always the kernel's out-of-memory killer{said}")
            if oom_words:
                return "oom", f"the worker (pid {pid}) ran out of memory {when} and died from {sig}{said}"
            words = _SIGNAL_WORDS.get(sig, "")
            return "crashed", f"the worker (pid {pid}) died from {sig}{f' ({words})' if words else ''} {when}{said}"
        state = "oom" if oom_words else "crashed"
        return state, f"the worker (pid {pid}) exited with status {rc} {when}{said}"


class _FellBack(Exception):
    """The runner switched to in-process measurement."""


def _platform() -> str:
    import jax

    return jax.devices()[0].platform


def _jax_env() -> dict[str, str]:
    """The parent's JAX settings that decide what the child computes."""
    import jax

    env = {"JAX_ENABLE_X64": "1" if jax.config.jax_enable_x64 else "0"}
    platforms = getattr(jax.config, "jax_platforms", None)
    if platforms:
        env["JAX_PLATFORMS"] = str(platforms)
    return env


# --------------------------------------------------------------------------- child


class _Child:
    """The worker side: one request at a time from stdin, events on a private stdout."""

    def __init__(self, out):
        self.out = out
        self.fn = None
        self.args: tuple = ()
        self.kwargs: dict = {}
        self.jit_kwargs: dict = {}
        self.leaves: list = []
        self.phase = "idle"

    def emit(self, **msg: Any) -> None:
        self.out.write(json.dumps(msg) + "\n")
        self.out.flush()

    def serve(self) -> None:
        import jax

        self.emit(event="ready", protocol=_PROTOCOL, pid=os.getpid(), platform=jax.devices()[0].platform,
                  jax=jax.__version__)
        for line in sys.stdin.buffer:
            if not line.strip():
                continue
            req = json.loads(line)
            op = req.get("op")
            if op == "exit":
                return
            self.phase = op
            try:
                if op == "load_study":
                    self.load_study(req)
                elif op == "load_args":
                    self.load_args(req)
                elif op == "trial":
                    self.trial(req)
                else:
                    self.emit(event="error", type="ProtocolError", message=f"unknown op {op!r}")
            except BaseException as exc:  # noqa: BLE001 - everything goes back to the parent
                if isinstance(exc, (KeyboardInterrupt, SystemExit)):
                    raise
                text = str(exc).strip().splitlines()[0] if str(exc).strip() else repr(exc)
                oom = isinstance(exc, MemoryError) or any(w in str(exc).lower() for w in _OOM_WORDS[:4])
                self.emit(event="error", id=req.get("id"), type=type(exc).__name__, message=text[:1500],
                          phase=self.phase, oom=oom)

    def load_study(self, req: dict[str, Any]) -> None:
        import jax

        from ._studyfile import load_examples

        examples = load_examples(req["path"])
        index = int(req.get("index", 0))
        if not 0 <= index < len(examples):
            raise StudyError(f"Study file {req['path']!r} has {len(examples)} examples; there is no index {index}.")
        ex = examples[index]
        self.fn, self.args, self.kwargs = ex.fn.fun, tuple(ex.args), dict(ex.kwargs)
        self.jit_kwargs = dict(ex.fn.jit_kwargs)
        leaves = [np.asarray(x) for x in jax.tree_util.tree_leaves((self.args, self.kwargs))
                  if isinstance(x, (jax.Array, np.ndarray, np.generic))]
        self.emit(event="loaded", function=ex.fn.key, digest=_digest(leaves))

    def load_args(self, req: dict[str, Any]) -> None:
        import jax.numpy as jnp

        arrays = [decode_array(d) for d in req["leaves"]]
        self.leaves = [jnp.asarray(a) for a in arrays]
        self.emit(event="loaded", digest=_digest(arrays))

    def trial(self, req: dict[str, Any]) -> None:
        import jax

        from . import _compat
        from ._measure import _copy, _dynamic_args, _flops, _memory, time_calls
        from ._rewrite import with_config

        rid = req["id"]
        with _compat.no_persistent_cache():
            _compat.clear_jax_caches()
            self.emit(event="started", id=rid)
            if req["mode"] == "study":
                self.phase = "trace"
                jitted = jax.jit(with_config(self.fn, Config.from_dict(req["config"])), **self.jit_kwargs)
                t0 = time.perf_counter()
                traced = jitted.trace(*self.args, **self.kwargs)
                t1 = time.perf_counter()
                self.phase = "lower"
                lowered = traced.lower()
                t2 = time.perf_counter()
                trace_s, lower_s = t1 - t0, t2 - t1
                dyn_args, dyn_kwargs = _dynamic_args(self.fn, self.args, self.kwargs, self.jit_kwargs)
                donating = bool(self.jit_kwargs.get("donate_argnums") or self.jit_kwargs.get("donate_argnames"))
            else:
                self.phase = "load"
                exported = jax.export.deserialize(bytearray(base64.b64decode(req["program"])))
                in_tree = exported.in_tree

                def flat_call(*leaves):
                    a, k = jax.tree_util.tree_unflatten(in_tree, leaves)
                    return exported.call(*a, **k)

                options = {"donate_argnums": tuple(req.get("donate") or ())}
                if req.get("compiler_options"):
                    options["compiler_options"] = req["compiler_options"]
                lowered = jax.jit(flat_call, **options).trace(*self.leaves).lower()
                trace_s, lower_s = float(req["trace_s"]), float(req["lower_s"])
                dyn_args, dyn_kwargs = tuple(self.leaves), {}
                donating = bool(req.get("donate"))
            self.emit(event="compile_start", id=rid, trace_s=trace_s, lower_s=lower_s)
            self.phase = "compile"
            t2 = time.perf_counter()
            compiled = lowered.compile()
            compile_s = time.perf_counter() - t2
        self.emit(event="compile_end", id=rid, compile_s=compile_s)
        self.phase = "run"
        outputs = None

        def call():
            nonlocal outputs
            a, k = (jax.tree_util.tree_map(_copy, (dyn_args, dyn_kwargs)) if donating else (dyn_args, dyn_kwargs))
            outputs = jax.block_until_ready(compiled(*a, **k))

        timing = dict(req.get("timing") or {})
        run_s, iqr_s, reps = time_calls(call, fresh_inputs=donating, **timing)
        encoded = [encode_array(x) for x in jax.tree_util.tree_leaves(outputs)] if req.get("keep_outputs") else []
        self.emit(event="result", id=rid, measurement={
            "trace_s": trace_s, "lower_s": lower_s, "compile_s": compile_s, "run_s": run_s, "run_iqr_s": iqr_s,
            "reps": reps, "memory": _memory(compiled), "flops": _flops(compiled)}, outputs=encoded)
        self.phase = "idle"


def _watch_parent(parent: int) -> None:
    """Exit when the parent is gone (it was SIGKILLed and could not reap us)."""
    while True:
        if os.getppid() != parent:
            os._exit(3)
        time.sleep(0.5)


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    opts = dict(zip(argv[::2], argv[1::2]))
    if "--memory-bytes" in opts:
        import resource

        limit = int(opts["--memory-bytes"])
        resource.setrlimit(resource.RLIMIT_DATA, (limit, limit))
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the parent decides; Ctrl-C goes to it
    if "--parent" in opts:
        threading.Thread(target=_watch_parent, args=(int(opts["--parent"]),), daemon=True).start()
    # The protocol gets a private copy of stdout; anything else printed goes to stderr.
    out = os.fdopen(os.dup(1), "w", buffering=1, encoding="utf-8")
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    _Child(out).serve()
    return 0


if __name__ == "__main__":
    sys.exit(main())
