"""The worker process (``python -m autotune.worker``): one request at a time from stdin,
events on a private copy of stdout, every stage timed through ``autotune.measuring._stages``.

The worker ignores SIGINT (the parent decides what an interrupt means) and exits by itself
when its parent is gone (``--parent PID``), also when the parent was SIGKILLed or
SIGTERMed and could not kill it. It keeps the executables of recent trials so the parent
can re-time their runtime (``retime``) without compiling again, and loads executables that
builder processes compiled (``load_built``, measured exactly as a trial).

This module is an entry point, the top of the import graph (like the CLI): it imports
study files and ``@at.autotuned`` functions; the parent side of the package never imports it.
"""

from __future__ import annotations

import base64
import json
import os
import signal
import sys
import threading
import time
from typing import Any

from autotune._errors import StudyError
from autotune.measuring._executables import ExecutableStore
from autotune.measuring._sampling import Sampling
from autotune.measuring._stages import (
    LOWERED_FIGURES,
    Executable,
    Stages,
    compile_config,
    donates,
    dynamic_args,
    lowered_figures,
    reuse,
    run_measurement,
    time_stages,
)
from autotune.measuring.process._codec import array_leaves, decode_array, decode_tree, digest, encode_array, jax_leaves
from autotune.measuring.process._protocol import PROTOCOL, Event, Location, Mode, Op, error_event, import_location
from autotune.measuring.process._shardings import place, placement
from autotune.program._config import Config


class Child:
    """The worker's server loop and its state: the function and inputs, kept executables."""

    def __init__(self, out, requests):
        self.out = out
        self.requests = requests
        self.fn = None
        self.args: tuple = ()
        self.kwargs: dict = {}
        self.jit_kwargs: dict = {}
        self.leaves: list = []
        self.store = ExecutableStore()
        self.phase = "idle"

    def emit(self, **msg: Any) -> None:
        import json

        self.out.write(json.dumps(msg) + "\n")
        self.out.flush()

    def next_request(self) -> dict[str, Any] | None:
        import json

        for line in self.requests:
            if line.strip():
                return json.loads(line)
        return None

    def serve(self) -> None:
        import jax

        devices = jax.devices()
        self.emit(
            event=Event.READY,
            protocol=PROTOCOL,
            pid=os.getpid(),
            platform=devices[0].platform,
            jax=jax.__version__,
            xla_flags=os.environ.get("XLA_FLAGS", ""),
            device_ids=[int(d.id) for d in devices],
            device=device_info(),
        )
        handlers = {
            Op.LOAD_STUDY: self.load_study,
            Op.LOAD_IMPORT: self.load_import,
            Op.LOAD_ARGS: self.load_args,
            Op.TRIAL: self.trial,
            Op.RETIME: self.retime,
            Op.RETAIN: self.retain,
            Op.LOAD_BUILT: self.load_built,
        }
        while True:
            req = self.next_request()
            if req is None or req.get("op") == Op.EXIT:
                return
            op = req.get("op")
            self.phase = op
            try:
                handler = handlers.get(op)
                if handler is None:
                    self.emit(event=Event.ERROR, id=req.get("id"), type="ProtocolError", message=f"unknown op {op!r}")
                else:
                    handler(req)
            except BaseException as exc:  # noqa: BLE001 - everything goes back to the parent
                if isinstance(exc, (KeyboardInterrupt, SystemExit)):
                    raise
                self.emit(**error_event(exc, req.get("id"), self.phase))
            self.phase = "idle"

    # -- getting the function and its inputs ------------------------------------------------
    def load_study(self, req: dict[str, Any]) -> None:
        from autotune.record._studyfile import load_examples

        examples = load_examples(req["path"])
        index = int(req.get("index", 0))
        if not 0 <= index < len(examples):
            raise StudyError(f"Study file {req['path']!r} has {len(examples)} examples; there is no index {index}.")
        ex = examples[index]
        self.fn, self.args, self.kwargs = ex.fn.fun, tuple(ex.args), dict(ex.kwargs)
        self.jit_kwargs = dict(ex.fn.jit_kwargs)
        self.emit(event=Event.LOADED, function=ex.fn.key, digest=digest(array_leaves((self.args, self.kwargs))))

    def load_import(self, req: dict[str, Any]) -> None:
        for path in reversed(req.get("sys_path") or []):
            if path not in sys.path:
                sys.path.insert(0, path)
        self.fn = import_location(Location.from_dict(req["location"]))
        args, kwargs = decode_tree(req["args"])
        self.args, self.kwargs = tuple(args), dict(kwargs)
        self.jit_kwargs = {k: tuple(v) if isinstance(v, list) else v for k, v in (req.get("jit_kwargs") or {}).items()}
        self.emit(
            event=Event.LOADED,
            digest=digest(array_leaves((self.args, self.kwargs))),
            placement=placement(jax_leaves((self.args, self.kwargs))),
        )

    def load_args(self, req: dict[str, Any]) -> None:
        arrays = [decode_array(d) for d in req["leaves"]]
        meshes: dict = {}
        self.leaves = [place(a, d.get("sharding"), meshes) for a, d in zip(arrays, req["leaves"])]
        self.emit(event=Event.LOADED, digest=digest(arrays), placement=placement(self.leaves))

    # -- trials -------------------------------------------------------------------------------
    def trial(self, req: dict[str, Any]) -> None:
        rid = req["id"]
        config = Config.from_dict(req.get("config"))
        key = config.to_json()
        self.emit(event=Event.STARTED, id=rid)
        if req.get("mode") in Mode.TRACED_IN_WORKER:
            stages = self._trace_here(req, config)
            if stages.reused is not None:
                kept = self.store.program(stages.program_hash)
                if kept is not None:
                    self.store.alias(key, reuse(kept.measurement, stages, config))
                self.emit(event=Event.RESULT, id=rid, skipped=True, measurement=lowered_figures(stages))
                return
            dyn_args, dyn_kwargs = dynamic_args(self.fn, self.args, self.kwargs, self.jit_kwargs)
            donating = donates(self.jit_kwargs)
        else:
            stages = self._compile_exported(req)
            dyn_args, dyn_kwargs, donating = tuple(self.leaves), {}, bool(req.get("donate"))
        self._run_and_reply(req, config, stages, dyn_args, dyn_kwargs, donating, compiled_in="runner")

    def load_built(self, req: dict[str, Any]) -> None:
        """Export mode, compiled by a builder process: load its serialised executable (the flat
        input and output trees rebuilt here) and measure it exactly as a trial is measured; the
        compile figures are the builder's. ``refused`` when it cannot be loaded in this process."""
        from autotune._errors import error_text

        rid = req["id"]
        self.emit(event=Event.STARTED, id=rid)
        self.phase = "load"
        t0 = time.perf_counter()
        try:
            compiled = load_executable(req["payload"], len(self.leaves), int(req["n_out"]), self.leaves)
        except Exception as exc:  # noqa: BLE001 - the parent compiles here instead
            self.emit(event=Event.REFUSED, id=rid, message=error_text(exc))
            return
        stages = _parents_figures(Stages(None, compiled=compiled, compile_s=float(req["compile_s"])), req)
        stages.compile_cpu_s = req.get("compile_cpu_s")
        config = Config.from_dict(req.get("config"))
        load_s = time.perf_counter() - t0
        self._run_and_reply(
            req, config, stages, tuple(self.leaves), {}, bool(req.get("donate")), compiled_in="builder", load_s=load_s
        )

    def _run_and_reply(
        self, req: dict[str, Any], config: Config, stages: Stages, dyn_args, dyn_kwargs, donating: bool, **said: Any
    ) -> None:
        """Time compiled ``stages``, keep the executable for ``retime``, send the result (``said``:
        where it was compiled, and more)."""
        import jax

        rid = req["id"]
        self.emit(event=Event.COMPILE_END, id=rid, compile_s=stages.compile_s)
        self.phase = "run"
        sampling = Sampling.of(req.get("sampling"))
        m = run_measurement(stages, dyn_args, dyn_kwargs, sampling, config=config, donating=donating, keep_outputs=True)
        m = m.replace(loaded_s=said.get("load_s"))  # an executable a builder compiled: loaded here
        key = config.to_json()
        self.store.put(key, Executable(stages.compiled, dyn_args, dyn_kwargs, donating, m.replace(outputs=None)))
        encoded = [encode_array(x) for x in jax.tree_util.tree_leaves(m.outputs)] if req.get("keep_outputs") else []
        self.emit(event=Event.RESULT, id=rid, measurement=m.to_dict(), outputs=encoded, **said)

    def _trace_here(self, req: dict[str, Any], config: Config) -> Stages:
        """Study-file and import modes: trace, lower (say so, maybe skip) and compile here."""
        rid = req["id"]

        def traced(st: Stages) -> None:
            self.phase = "lower"

        def lowered(st: Stages) -> Any:
            self.emit(event=Event.LOWERED, id=rid, program_hash=st.program_hash, trace_s=st.trace_s, lower_s=st.lower_s)
            if req.get("ask_lowered"):
                reply = self.next_request()
                if reply is None:
                    raise SystemExit(0)  # the parent closed our stdin: it is gone
                if reply.get("op") != Op.LOWERED_REPLY or reply.get("id") != rid:
                    raise RuntimeError(f"expected the parent's lowered_reply, got {str(reply)[:200]}")
                if reply.get("skip"):
                    return True
            self.emit(event=Event.COMPILE_START, id=rid, trace_s=st.trace_s, lower_s=st.lower_s)
            self.phase = "compile"
            return None

        self.phase = "trace"
        return compile_config(
            self.fn, self.args, self.kwargs, config, jit_kwargs=self.jit_kwargs, on_traced=traced, on_lowered=lowered
        )

    def _compile_exported(self, req: dict[str, Any]) -> Stages:
        """Export mode: the parent traced and lowered; deserialise and compile here."""
        import jax

        from autotune.program import _compat

        with _compat.no_persistent_cache():
            _compat.clear_jax_caches()
            self.phase = "load"
            exported = jax.export.deserialize(bytearray(base64.b64decode(req["program"])))
            in_tree = exported.in_tree

            def flat_call(*leaves):
                a, k = jax.tree_util.tree_unflatten(in_tree, leaves)
                return exported.call(*a, **k)

            options: dict[str, Any] = {"donate_argnums": tuple(req.get("donate") or ())}
            if req.get("compiler_options"):
                options["compiler_options"] = req["compiler_options"]

            def lowered(st: Stages) -> None:
                self.emit(event=Event.COMPILE_START, id=req["id"], trace_s=req["trace_s"], lower_s=req["lower_s"])
                self.phase = "compile"

            stages = time_stages(jax.jit(flat_call, **options), tuple(self.leaves), on_lowered=lowered)
        return _parents_figures(stages, req)

    def retime(self, req: dict[str, Any]) -> None:
        self.phase = "run"
        m = self.store.retime(req["key"], Sampling.of(req.get("sampling")), beside=bool(req.get("beside")))
        if m is None:
            self.emit(event=Event.GONE, id=req["id"])
        else:
            self.emit(event=Event.RESULT, id=req["id"], measurement=m.to_dict())

    def retain(self, req: dict[str, Any]) -> None:
        self.store.retain(req.get("keys") or [])
        self.emit(event=Event.RETAINED, id=req["id"], kept=len(self.store))


def _parents_figures(stages: Stages, req: dict[str, Any]) -> Stages:
    """``stages`` with the trace and lower figures and the program hash the parent sent (export
    mode: the parent traced and lowered)."""
    for name in LOWERED_FIGURES:
        setattr(stages, name, req.get(name))
    return stages


def load_executable(payload: str, n_in: int, n_out: int, leaves: list) -> Any:
    """A builder's serialised executable (base64), loaded onto the device of ``leaves`` (the
    first device when there are none): it takes ``n_in`` flat arrays and returns a list of
    ``n_out``. The bytes are ``serialize_executable``'s (a pickle inside), passed between our own
    processes only, never stored."""
    import jax
    from jax.experimental.serialize_executable import deserialize_and_load

    placed = [d for x in leaves[:1] for d in getattr(getattr(x, "sharding", None), "device_set", ())]
    device = placed[0] if len(placed) == 1 else jax.devices()[0]
    in_tree = jax.tree_util.tree_structure((tuple(range(n_in)), {}))
    out_tree = jax.tree_util.tree_structure([0] * n_out)
    return deserialize_and_load(base64.b64decode(payload), in_tree, out_tree, execution_devices=[device])


def _watch_parent(parent: int) -> None:
    """Exit when the parent is gone (it was killed and could not kill us)."""
    while True:
        if os.getppid() != parent:
            os._exit(3)
        time.sleep(0.5)


def device_info() -> dict[str, Any]:
    """This process's device as the cache keys it (``_keys.device_info``): what a parent that
    traces on the CPU learns about the device its trials run on."""
    from autotune.program._keys import device_info as info

    return info()


def serving_stdout(argv: list[str]) -> Any:
    """Set this process up as a server of its parent (``--memory-bytes N``: ``RLIMIT_DATA``;
    ``--parent PID``: exit when it is gone; SIGINT ignored, the parent decides) and return the
    protocol's private copy of stdout (anything else printed goes to stderr)."""
    opts = dict(zip(argv[::2], argv[1::2]))
    if "--memory-bytes" in opts:
        import resource

        limit = int(opts["--memory-bytes"])
        resource.setrlimit(resource.RLIMIT_DATA, (limit, limit))
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the parent decides; Ctrl-C goes to it
    if "--parent" in opts:
        threading.Thread(target=_watch_parent, args=(int(opts["--parent"]),), daemon=True).start()
    out = os.fdopen(os.dup(1), "w", buffering=1, encoding="utf-8")
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    return out


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv == ["--device"]:  # a probe (autotune.measuring._host.target_device): print the device, exit
        print(json.dumps(device_info()))
        return 0
    Child(serving_stdout(argv), sys.stdin.buffer).serve()
    return 0
