"""The parent/worker protocol: message names, the protocol version, and where a function lives.

Parent and worker speak JSON lines: requests on the worker's stdin, events on a private
copy of its stdout (whatever user code prints goes to stderr). One request is served at a
time; a trial's events carry the request's ``id``.

A trial, in order of events: ``started``; then, when the worker traces (study-file and
import modes), ``lowered`` (the program hash; when the request asked, the worker waits for
a ``lowered_reply`` telling it to compile or to skip) and ``compile_start``;
``compile_end``; ``result`` (or ``error`` at any point). A ``load_built`` request (an
executable a builder process compiled, ``_builders``) goes ``started``, ``compile_end`` (the
builder's compile seconds), ``result``; or ``refused`` when the executable cannot be loaded here.

Builder processes (``python -m autotune.worker._build_child``) speak the same way: ``ready``,
then one ``built`` (or ``error``) per ``build`` or ``probe`` request.
"""

from __future__ import annotations

import importlib
import os
import sys
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from autotune.program._call import Call

PROTOCOL = 5


class Op:
    """Requests the parent sends."""

    LOAD_STUDY = "load_study"  # import a study file, take examples()[index]
    LOAD_IMPORT = "load_import"  # import a function by module and qualname; arguments as JSON
    LOAD_ARGS = "load_args"  # the flat input leaves of an exported program
    TRIAL = "trial"  # measure one config
    LOWERED_REPLY = "lowered_reply"  # after a "lowered" event: compile, or skip (a shared program)
    RETIME = "retime"  # time a kept executable's runtime again
    RETAIN = "retain"  # keep only these configs' executables
    LOAD_BUILT = "load_built"  # load an executable a builder compiled, and measure it as a trial
    BUILD = "build"  # (to a builder) compile an exported program for the target, serialise it
    PROBE = "probe"  # (to a builder) compile a tiny program for the target: can it build at all?
    EXIT = "exit"


class Event:
    """Events the worker sends."""

    READY = "ready"
    LOADED = "loaded"
    STARTED = "started"
    LOWERED = "lowered"
    COMPILE_START = "compile_start"
    COMPILE_END = "compile_end"
    RESULT = "result"
    GONE = "gone"  # retime: that executable is not kept
    RETAINED = "retained"
    REFUSED = "refused"  # load_built: the executable cannot be loaded in this worker
    BUILT = "built"  # a builder's serialised executable (or a probe's success)
    ERROR = "error"
    NOISE = "noise"  # a line that was not JSON


class Mode:
    """How the function gets into the worker."""

    EXPORT = "export"  # the parent traces and lowers; the program crosses as jax.export bytes
    STUDY = "study"  # the worker imports a study file and measures examples()[index]
    IMPORT = "import"  # the worker imports the function and gets the arguments as JSON

    TRACED_IN_WORKER = ("study", "import")


CARRIED_JIT_OPTIONS = frozenset(
    {
        "static_argnums",
        "static_argnames",
        "donate_argnums",
        "donate_argnames",
        "keep_unused",
        "inline",
        "compiler_options",
    }
)
"""The ``jax.jit`` options a worker can be given; any other means measuring in-process."""

TPU_TOPOLOGIES = {"TPU v5 lite": "v5e:1x1", "TPU v5e": "v5e:1x1"}
"""Device kind (as a single-chip worker reports it) -> the compile-only topology a builder compiles for."""


@dataclass(frozen=True)
class Location:
    """Where a worker process can import a function from.

    Either a study file and the index of one of its ``examples()`` (the worker takes the
    function and its arguments from there), or a module and the qualified name of a
    function in it (an ``@at.autotuned`` function or a plain one; the arguments are sent).

    Attributes:
        module: the module's import name (``"mypkg.model"``), or None for a study file.
        qualname: the function's qualified name in it (``"step"``, ``"Model.step"``).
        file: the module's or study file's path (checked: the worker must import the same file).
        index: for a study file, the ``examples()`` index.
    """

    module: str | None = None
    qualname: str | None = None
    file: str | None = None
    index: int | None = None

    @classmethod
    def study_file(cls, path: str | os.PathLike, index: int = 0) -> Location:
        return cls(file=os.path.abspath(os.fspath(path)), index=int(index))

    @classmethod
    def of(cls, fn: Any) -> Location | None:
        """The location of ``fn`` when another process can import it by module and qualname
        and get this very function (a module-level function, or an ``@at.autotuned`` one
        whose wrapped function is ``fn``); None for lambdas, closures, ``__main__``...

        Example::

            >>> import os.path
            >>> Location.of(os.path.join).qualname
            'join'
        """
        module, qualname = getattr(fn, "__module__", None), getattr(fn, "__qualname__", None)
        if not module or not qualname or module == "__main__" or "<" in qualname:
            return None
        mod = sys.modules.get(module)
        path = getattr(mod, "__file__", None)
        if mod is None or not path:
            return None
        try:
            found = resolve(mod, qualname)
        except AttributeError:
            return None
        if unwrap(found) is not unwrap(fn):
            return None
        return cls(module=module, qualname=qualname, file=os.path.abspath(path))

    @property
    def is_study_file(self) -> bool:
        return self.module is None

    def to_dict(self) -> dict[str, Any]:
        return {"module": self.module, "qualname": self.qualname, "file": self.file, "index": self.index}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Location:
        return cls(d.get("module"), d.get("qualname"), d.get("file"), d.get("index"))

    def describe(self) -> str:
        if self.is_study_file:
            return f"examples()[{self.index}] of {self.file}"
        return f"{self.module}:{self.qualname}"


def error_event(exc: BaseException, rid: Any, phase: str) -> dict[str, Any]:
    """The ``error`` event a worker or a builder sends for ``exc``, raised serving request ``rid``
    in ``phase``: its type, its message and whether it ran out of memory (``oom``; then what the
    config asked for, what there was and what this process already used, where known)."""
    from autotune._errors import error_text
    from autotune.measuring._oom import RanOutOfMemory, data_in_use, out_of_memory

    event = {
        "event": Event.ERROR,
        "id": rid,
        "type": type(exc).__name__,
        "message": error_text(exc, with_type=False),
        "phase": phase,
        "oom": False,
    }
    if isinstance(exc, RanOutOfMemory):
        found, asked, in_use = exc.found, exc.asked_bytes, exc.in_use_bytes
    else:
        found = out_of_memory(str(exc), memory_error=isinstance(exc, MemoryError))
        asked, in_use = None, data_in_use()
    if found is not None:
        event.update(oom=True, asked_bytes=asked if asked is not None else found.asked_bytes, in_use_bytes=in_use)
        event.update(capacity_bytes=found.capacity_bytes, space=found.space, said=found.said)
    return event


def oom_event_reason(event: dict[str, Any], limit_gb: float | None, phase: str | None = None) -> str:
    """The one line of a trial whose worker or builder sent an ``error`` event with ``oom``
    (:func:`error_event`), under a memory limit of ``limit_gb`` GiB (``trial_memory_gb``) or none."""
    from autotune.measuring._oom import OutOfMemory, oom_reason

    found = OutOfMemory(None, event.get("capacity_bytes"), event.get("space"), event.get("said") or "")
    in_use = event.get("in_use_bytes") if limit_gb is not None else None
    return oom_reason(phase or event.get("phase") or "", found, limit_gb, in_use, event.get("asked_bytes"))


def load_import_message(loc: Location, call: Call) -> tuple[dict[str, Any], str]:
    """The ``load_import`` request for ``loc`` and the arguments of ``call``, and the digest of their
    arrays (the worker must report the same). Raises ``NotPortable`` for arguments that
    cannot cross as JSON."""
    import json

    from autotune.measuring.process._codec import NotPortable, array_leaves, digest, encode_tree

    args, kwargs, jit_kwargs = call.args, call.kwargs, call.jit_kwargs
    message = {
        "op": Op.LOAD_IMPORT,
        "location": loc.to_dict(),
        "sys_path": list(sys.path),
        "args": encode_tree([list(args), dict(kwargs)], keep=True),  # sent to each new worker
        "jit_kwargs": dict(jit_kwargs),
    }
    try:
        json.dumps(message["jit_kwargs"])
    except (TypeError, ValueError):
        raise NotPortable(f"the jax.jit options {sorted(jit_kwargs)} cannot be sent as JSON") from None
    return message, digest(array_leaves((tuple(args), dict(kwargs))))


def resolve(module: Any, qualname: str) -> Any:
    """``module.<qualname>``, following dots (``"Model.step"``)."""
    obj = module
    for part in qualname.split("."):
        obj = getattr(obj, part)
    return obj


def unwrap(obj: Any) -> Any:
    """The plain function behind an ``@at.autotuned`` function (duck-typed, so the parent
    side never imports the decorator), or ``obj`` itself."""
    ctl = getattr(obj, "autotune", None)
    if ctl is not None and callable(getattr(ctl, "fun", None)) and hasattr(ctl, "jit_kwargs"):
        return ctl.fun
    if callable(getattr(obj, "fun", None)) and hasattr(obj, "jit_kwargs") and hasattr(obj, "key"):
        return obj.fun
    return obj


def import_location(loc: Location) -> Any:
    """Import ``loc``'s module (checking it is the expected file) and return the function."""
    module = importlib.import_module(loc.module)
    path = getattr(module, "__file__", None)
    if loc.file and path and os.path.realpath(path) != os.path.realpath(loc.file):
        raise ImportError(
            f"module {loc.module!r} imports {path} in the worker, not {loc.file}; "
            "run the tuning from the same environment (sys.path) as the function's module"
        )
    return unwrap(resolve(module, loc.qualname))
