"""Export mode's trials, the parent's side: prepare a config here (trace, lower, ``jax.export``),
now or ahead of time (:meth:`ExportHost.prefetch`), then have it compiled in the worker, or by a
builder process (``_builders``) while the worker measures others and only loads the executable.

A config prepared ahead keeps its trace and lower figures, taken then; the compile budget is
applied to them, and ``on_lowered`` asked, when the config is measured. Configs that lower to one
program share one pending build. What a builder compiled for a config is kept here by config key
(the last few and those :meth:`retain` names), so a fresh worker (``renew``: confirmation's second
process) loads it instead of compiling again, and ``retime`` in a worker that lacks the
executable loads it too. Anything builders cannot do (the probe fails, the worker refuses an
executable, builds keep failing where the worker compiles) turns them off with one warning, and
the worker compiles as it does without them.
"""

from __future__ import annotations

import time
import warnings
import weakref
from collections import Counter, OrderedDict
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from autotune import _interrupt
from autotune._errors import StudyError
from autotune.measuring._runner import TrialFailed, stage_guard
from autotune.measuring._sampling import Sampling
from autotune.measuring._stages import Measurement, Stages, lowered_figures, reuse
from autotune.measuring.process._builders import Build, BuilderPool, auto_count
from autotune.measuring.process._channel import worker_env
from autotune.measuring.process._codec import NotPortable, remove, spilled
from autotune.measuring.process._export import (
    CannotExport,
    Exported,
    args_message,
    call_leaves,
    export,
    outputs_of,
    trace_and_lower,
)
from autotune.measuring.process._policy import jax_env
from autotune.measuring.process._protocol import TPU_TOPOLOGIES, Event, Mode, Op
from autotune.measuring.process._shardings import placement
from autotune.measuring.process._slot import WorkerHost
from autotune.program._call import Call
from autotune.program._config import Config

BUILD_ERRORS = 3
"""Configs a builder failed to compile that the worker then compiled: past this many, builds stop."""


class FellBack(Exception):
    """The runner switched to in-process measurement."""


@dataclass
class Prepared:
    """A config traced, lowered and exported here (``ex`` None: the runner switched to import
    mode), or the failure that stopped it; ``build`` when a builder compiles it."""

    stages: Stages | None = None
    ex: Exported | None = None
    build: Build | None = None
    failed: TrialFailed | None = None


@dataclass
class Built:
    """A builder's executable for a config (the ``built`` event) and what loading it needs."""

    event: dict[str, Any]
    stages: Stages  # the parent's trace and lower figures and the program hash (nothing traced kept)
    donate: list[int]
    out_tree: Any


class ExportHost(WorkerHost):
    """Export mode for :class:`~autotune.measuring.process.WorkerRunner` (which sets the attributes)."""

    call: Call | None
    sampling: Sampling
    trial_sampling: Sampling
    location: Any
    recent: int
    builders: int | str
    build_target: dict[str, Any] | None
    import_reason: str | None
    fallback_reason: str | None
    _closed: bool

    def _init_builds(self, builders: int | str, build_target: dict[str, Any] | None) -> None:
        self.builders, self.build_target = builders, build_target
        self.compiled_in: Counter[str] = Counter()  # where each measured config compiled: runner / builder
        self._pool: BuilderPool | None = None
        self._seen_pool: BuilderPool | None = None  # the pool started, closed or not (compile_summary)
        self._builds_off: str | None = None  # why builds stopped (warned once)
        self._build_errors = 0
        self._prepared: dict[str, Prepared] = {}
        self._built: OrderedDict[str, Built] = OrderedDict()
        self._built_kept: set[str] = set()
        self._renewed = False
        self._measured: set[str | None] = set()  # program hashes measured by this runner

    # -- public ------------------------------------------------------------------------------
    def prefetch(self, configs: Iterable[Config | dict], *, fresh: bool = False) -> None:
        """Prepare ``configs`` now and start their builds (the next ones a search will measure);
        configs prepared before and not named again are dropped. Nothing happens without builders.
        ``fresh``: each is compiled afresh even where its program was measured, and one build runs
        at a time, in the order given (confirmation's compiled rounds: the next contender compiles
        while this one is timed, never beside another compile)."""
        wanted = [Config.from_dict(c) for c in configs]
        keys = {c.to_json() for c in wanted}
        for key in [k for k in self._prepared if k not in keys]:
            self._drop(self._prepared.pop(key))
        if self._pool is not None:
            self._pool.at_once = 1 if fresh else None
        if not wanted or self._closed or self.fallback_reason is not None or self.mode != Mode.EXPORT:
            return
        from autotune.measuring.process._follow import latch

        with latch():
            try:
                self._spawn()
                platform = self._target_platform()
                pool = self._builder_pool()
                if pool is None:
                    return
                pool.at_once = 1 if fresh else None  # a pool started just now
                for config in wanted:
                    key = config.to_json()
                    held = self._prepared.get(key)
                    if fresh and held is not None and held.ex is not None:
                        self._submit(held)  # prepared to be shared: built afresh now
                    if held is not None or (self._renewed and key in self._built):
                        continue
                    _interrupt.check()
                    self._prepared[key] = self._prepare(config, platform, None, fresh)
                    if self.mode != Mode.EXPORT:
                        return
            except (FellBack, TrialFailed, StudyError):
                return  # measuring the config meets it again, and reports it there
            except KeyboardInterrupt:  # Interrupted: the worker's state is unknown
                self._discard()
                raise

    @property
    def lookahead(self) -> int:
        """How many configs a search should prefetch beyond the one it measures: one per builder."""
        return self._pool.n if self._pool is not None else 0

    def compile_summary(self) -> str:
        """Where this runner's configs were compiled, in one short line."""
        built, here, loaded = (self.compiled_in[k] for k in ("builder", "runner", "loaded"))
        again = f"; {loaded} loaded again without compiling" if loaded else ""
        if built:
            pool = self._seen_pool
            n = pool.n if pool is not None else 0
            how = " (deviceless)" if pool is not None and pool.deviceless else ""
            rest = f", {here} in the runner" if here else ""
            return f"{built} compiles in {n} builder process{'es' if n != 1 else ''}{how}{rest}{again}"
        return "compiled in the runner" + (f" (builders off: {self._builds_off[:160]})" if self._builds_off else "")

    # -- measuring --------------------------------------------------------------------------
    def _measure_export(self, config: Config, budget: float | None, on_lowered) -> Measurement:
        self._spawn()  # the worker imports JAX while this process traces
        platform = self._target_platform()  # a trace-only parent waits for its first worker here
        key = config.to_json()
        kept = self._built.get(key) if self._renewed else None
        if kept is not None:  # a fresh worker loads what a builder compiled for the first one
            earlier = on_lowered(kept.stages.program_hash) if on_lowered is not None else None
            if earlier is not None:
                return reuse(earlier, kept.stages, config)
            m = self._load_built(config, kept)
            if m is not None:
                self.compiled_in["loaded"] += 1
                return m
        started = time.monotonic()
        prep = self._prepared.pop(key, None)
        if prep is None:
            self._builder_pool()
            prep = self._prepare(config, platform, budget)
        elif prep.stages is not None:
            stage_guard(budget)("lower", prep.stages)  # prepared ahead: the budget of now applies
        if prep.failed is not None:
            raise prep.failed
        if prep.ex is None:  # export failed: the worker imports the function
            return self._measure_traced(config, budget, on_lowered)
        stages, ex = prep.stages, prep.ex
        if on_lowered is not None:
            earlier = on_lowered(stages.program_hash)
            if earlier is not None:
                self._drop(prep)
                return reuse(earlier, stages, config)
        self._measured.add(stages.program_hash)
        self._submit(prep)
        if prep.build is not None and self._pool is not None:
            grace = self.prune_grace_s if self.prune_grace_s is not None else (self._pool.startup_s or 0.0)
            event = self._pool.wait(prep.build, budget, grace)
            if event is not None:
                out_tree = ex.out_tree if ex.out_tree is not None else ex.exported.out_tree
                built = Built(event, Stages(None, **lowered_figures(stages)), ex.request["donate"], out_tree)
                m = self._load_built(config, built)
                if m is not None:
                    self.compiled_in["builder"] += 1
                    self._keep(key, built)
                    return m
            elif self._pool.unavailable is not None:
                self._builds_stop(self._pool.unavailable)
            elif prep.build.error != "cancelled":
                self._build_errors += 1  # it failed there: compiled here, to see whether it fails here too
        request = dict(ex.request, config=config.to_dict(), sampling=self.trial_sampling.to_dict())
        done, _ = self._run(request, budget, started, parent_s=stages.trace_s + stages.lower_s)
        self.compiled_in["runner"] += 1
        if self._build_errors >= BUILD_ERRORS and self._pool is not None:
            self._builds_stop(f"{self._build_errors} configs failed to compile in a builder but compiled in the worker")
        return Measurement.from_dict(done["measurement"]).replace(
            config=config, outputs=outputs_of(ex.exported, done.get("outputs"), ex.out_tree)
        )

    def _prepare(self, config: Config, platform: str | None, budget: float | None, fresh: bool = False) -> Prepared:
        """Trace, lower and export ``config`` (a failure kept for its measure) and start its build
        (``fresh``: even where its program was measured here)."""
        started = time.monotonic()
        try:
            stages = trace_and_lower(
                self.call, config, stage_guard(budget, self.trial_timeout, started, " in the parent"), platform
            )
        except TrialFailed as exc:
            return Prepared(failed=exc)
        try:
            ex = export(stages, self.call, self.sampling, platform=platform)
        except CannotExport as exc:
            self._switch_to_import(str(exc))
            return Prepared()
        if self._args_line is None:
            try:
                self._args_line, _, files = args_message(ex.exported, self.call)
            except NotPortable as exc:
                raise self._fall_back(str(exc)) from None
            weakref.finalize(self, remove, files)  # the line goes to each new worker: its files go with this host
            self._placement = placement(call_leaves(self.call))
        prep = Prepared(stages, ex)
        if fresh or stages.program_hash not in self._measured:  # a program measured here is shared, not built again
            self._submit(prep)
        return prep

    def _submit(self, prep: Prepared) -> None:
        """Start ``prep``'s build where builders run and it is a one-device program on device 0."""
        stages, ex = prep.stages, prep.ex
        one_device = getattr(ex.exported, "nr_devices", 1) == 1 and set(self._placement["devices"]) <= {0}
        if prep.build is None and self._pool is not None and self._builds_off is None and one_device:
            cpu = (stages.trace_cpu_s or stages.trace_s) + (stages.lower_cpu_s or stages.lower_s)
            prep.build = self._pool.submit(stages.program_hash, ex.request, cpu, stages.trace_s + stages.lower_s)

    def _load_built(self, config: Config, built: Built, keep_outputs: bool = True) -> Measurement | None:
        """Load a builder's executable in the worker and measure it as a trial is measured; None
        when the worker refuses it (builds stop then, with one warning)."""
        e, st = built.event, built.stages
        request = {
            "op": Op.LOAD_BUILT,
            "payload": e["payload"],
            "n_out": e["n_out"],
            "compile_s": e["compile_s"],
            "compile_cpu_s": e.get("compile_cpu_s"),
            "config": config.to_dict(),
            **lowered_figures(st),
            "donate": built.donate,
            "sampling": self.trial_sampling.to_dict(),
            "keep_outputs": keep_outputs,
        }
        done, _ = self._run(request, None, time.monotonic(), parent_s=st.trace_s + st.lower_s + e["compile_s"])
        if done.get("event") == Event.REFUSED:
            self._builds_stop(f"the worker could not load an executable a builder compiled ({done.get('message')})")
            return None
        m = Measurement.from_dict(done["measurement"]).replace(config=config)
        return m.replace(outputs=outputs_of(None, done.get("outputs"), built.out_tree)) if keep_outputs else m

    def _retime_built(self, config: Config) -> Measurement | None:
        """``retime`` where the worker lacks the executable: load the one a builder compiled."""
        built = self._built.get(config.to_json()) if self.mode == Mode.EXPORT else None
        m = None if built is None else self._load_built(config, built, keep_outputs=False)
        self.compiled_in["loaded"] += m is not None
        return m

    # -- what is kept, and when builds stop -------------------------------------------------
    def _keep(self, key: str, built: Built) -> None:
        self._built[key] = built
        self._built.move_to_end(key)
        loose = [k for k in self._built if k not in self._built_kept]
        for k in loose[: max(0, len(loose) - self.recent)]:
            del self._built[k]

    def _keep_only(self, keys: Iterable[str]) -> None:
        """``retain``: keep only these configs' built executables."""
        self._built_kept = set(keys)
        for k in [k for k in self._built if k not in self._built_kept]:
            del self._built[k]

    def _drop(self, prep: Prepared) -> None:
        """A prepared config nobody will measure: its build stops unless another one shares it."""
        if prep.build is not None and self._pool is not None:
            if not any(p.build is prep.build for p in self._prepared.values()):
                self._pool.cancel(prep.build)

    def _start_builders(self) -> None:
        """Start the builders with the worker (their JAX and libtpu start-up overlaps with its),
        where their number is known before the worker reports its device: a number given, or
        ``"auto"`` in a trace-only parent where libtpu is installed (undone if the device is
        not one builders compile for)."""
        from autotune.measuring import _host

        if self._pool is not None or self._builds_off is not None or self.mode != Mode.EXPORT:
            return
        import importlib.util

        tpu = {"platform": "tpu", "device_kind": next(iter(TPU_TOPOLOGIES)), "device_count": 1}
        device = _host.learned() or (tpu if importlib.util.find_spec("libtpu") else {})
        count = auto_count(self.builders, pinned=_host.pinned(), device=device)
        if count > 0:
            self._new_pool(count, self.build_target)

    def _new_pool(self, count: int, target: dict[str, Any] | None) -> None:
        memory = None if self.trial_memory_gb is None else int(self.trial_memory_gb * 2**30)
        self._pool = self._seen_pool = BuilderPool(
            count,
            target,
            python=self.python,
            env=worker_env(jax_env()),
            memory_bytes=memory,
            startup_timeout=self.startup_timeout,
            trial_timeout=self.trial_timeout,
        )

    def _builder_pool(self) -> BuilderPool | None:
        """The builders (started on first use), or None when configs compile in the worker."""
        if self._builds_off is not None or self._closed:
            return None
        if self._pool is None or self._pool.target is None:
            from autotune.measuring import _host

            device = self.device_info()
            count = auto_count(self.builders, pinned=_host.pinned(), device=device)
            if count <= 0:
                self._close_builders()  # started early for a device they do not compile for
                self._seen_pool = None
                return None
            target = self.build_target or {k: device.get(k) for k in ("platform", "device_kind", "device_count")}
            if self._pool is None:
                self._new_pool(count, target)
            self._pool.target = target
        if self._pool.unavailable is not None:
            self._builds_stop(self._pool.unavailable)
            return None
        return self._pool

    def _builds_stop(self, why: str) -> None:
        """Compile in the worker from now on, and say why once."""
        if self._builds_off is None:
            self._builds_off = why
            warnings.warn(
                f"autotune: compiling in the worker process, not in builder processes: {why}.",
                RuntimeWarning,
                stacklevel=6,
            )
        self._close_builders()

    def _close_builders(self) -> None:
        pool, self._pool = self._pool, None
        for prep in self._prepared.values():
            prep.build = None
        if pool is not None:
            pool.close()

    def _switch_to_import(self, reason: str) -> None:
        """Export failed: let the worker import the function (or fall back without a location)."""
        loc = self.location
        if loc is None:
            raise self._fall_back(reason)
        if loc.is_study_file:
            self.mode, self.study_file, self.index = Mode.STUDY, loc.file, loc.index
        else:
            from autotune.measuring.process._codec import jax_leaves
            from autotune.measuring.process._protocol import load_import_message

            try:
                self._import_request, self._input_digest = load_import_message(loc, self.call)
                weakref.finalize(self, remove, spilled(self._import_request))
                self._placement = placement(jax_leaves((self.call.args, self.call.kwargs)))
            except NotPortable as exc:
                raise self._fall_back(f"{reason}, and {exc}") from None
            self.mode = Mode.IMPORT
        self.import_reason = reason
        if self._worker is not None:
            self._worker.loaded = False
