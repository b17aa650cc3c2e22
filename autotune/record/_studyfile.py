"""Load a study file: plain Python defining @at.autotuned functions and ``examples()``.

Everything that can go wrong in the user's file (it does not import, ``examples()``
raises or returns something else than ``[(fn, args[, kwargs])]``, an example passes
arguments its function does not take) is a :class:`StudyError` naming the file, the
example and the fix: one line at the command line, never a traceback.

A study that needs several devices (a ``Mesh`` of 8 host CPU devices) says so with a
top-level ``HOST_DEVICES = 8``: it is read from the file's text before the file is
imported, and the process asks XLA for that many host devices
(``XLA_FLAGS=--xla_force_host_platform_device_count=8``) while JAX has not started yet;
worker processes inherit the flag. A process whose JAX already runs with fewer devices
gets a one-line StudyError naming the command that runs the study in a process of its own.
"""

from __future__ import annotations

import ast
import contextlib
import importlib.util
import inspect
import os
import sys
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from autotune._errors import StudyError, error_text
from autotune.jit._decorator import controller


@dataclass
class Example:
    """One function and the inputs to tune it on.

    Attributes:
        fn: the ``Autotuned`` object of an ``@at.autotuned`` function.
        args, kwargs: exactly a call's arguments (for a bound method, the instance first).
        index: its position in ``examples()``; path: the study file.
    """

    fn: Any
    args: tuple
    kwargs: dict[str, Any] = field(default_factory=dict)
    index: int = 0
    path: str = ""

    @property
    def where(self) -> str:
        return f"Study file {self.path!r}: examples()[{self.index}] ({self.fn.key})"

    @contextlib.contextmanager
    def traced(self) -> Iterator[None]:
        """Turn a ``TypeError`` raised while tracing (the function called with arguments it
        does not take, or a body that cannot take them) into a one-line StudyError."""
        try:
            yield
        except TypeError as exc:
            raise StudyError(
                f"{self.where} could not be traced with its arguments: TypeError: "
                f"{_first_line(exc)}. Make examples()[{self.index}] pass what {self.fn.__name__}"
                f"{_signature_text(self.fn.fun)} takes."
            ) from exc

    def sites(self) -> list:
        """The loop sites of the function traced on these arguments (a TypeError explained)."""
        with self.traced():
            return self.fn.sites(*self.args, **self.kwargs)


def _first_line(exc: BaseException) -> str:
    return error_text(exc, with_type=False)


def _signature_text(fn: Any) -> str:
    try:
        return str(inspect.signature(fn))
    except (TypeError, ValueError):
        return "(...)"


HOST_DEVICES_FLAG = "--xla_force_host_platform_device_count"


def host_devices(path: str) -> int:
    """The devices a study file declares it needs (``HOST_DEVICES = 8`` at its top level, a
    literal whole number), read from its text without importing it; 1 where it says nothing."""
    try:
        with open(path, encoding="utf-8") as fh:
            tree = ast.parse(fh.read(), path)
    except (OSError, SyntaxError, ValueError):  # the import that follows reports it
        return 1
    for node in tree.body:
        if isinstance(node, ast.Assign):
            targets = node.targets
        elif isinstance(node, ast.AnnAssign) and node.value is not None:
            targets = [node.target]
        else:
            continue
        if any(isinstance(t, ast.Name) and t.id == "HOST_DEVICES" for t in targets):
            value = getattr(node.value, "value", None) if isinstance(node.value, ast.Constant) else None
            if type(value) is not int or value < 1:
                raise StudyError(
                    f"Study file {path!r}: HOST_DEVICES must be a whole number written as a "
                    "literal, e.g. HOST_DEVICES = 8, so it can be read before JAX starts."
                )
            return value
    return 1


def provide_host_devices(path: str, n: int) -> None:
    """Give this process ``n`` devices: XLA's host-device flag where ``XLA_FLAGS`` does not set
    it yet (read when JAX starts its backends; the worker processes inherit it), then check."""
    before = os.environ.get("XLA_FLAGS")
    if HOST_DEVICES_FLAG not in (before or ""):
        os.environ["XLA_FLAGS"] = f"{before or ''} {HOST_DEVICES_FLAG}={n}".strip()
    import jax

    devices = jax.devices()
    if len(devices) >= n:
        return
    if before is None:  # the flag came too late for this process: its children should not get it either
        os.environ.pop("XLA_FLAGS", None)
    else:
        os.environ["XLA_FLAGS"] = before
    raise StudyError(
        f"Study file {path!r} needs {n} devices (HOST_DEVICES = {n}), but JAX runs with "
        f"{len(devices)} {devices[0].platform} device(s) in this process; run it in a process "
        f"of its own: XLA_FLAGS={HOST_DEVICES_FLAG}={n} autotune tune {path} (add "
        "JAX_PLATFORMS=cpu on a GPU or TPU machine)."
    )


def load_module(path: str):
    """Import ``path`` as a module named after its file stem (its folder goes on sys.path),
    so function keys match an ordinary ``import`` of the same file."""
    if not os.path.isfile(path):
        raise StudyError(
            f"Study file {path!r} does not exist; pass the path of a .py file such as studies/seed_rollout.py."
        )
    if not path.endswith(".py"):
        raise StudyError(f"Study file {path!r} is not a .py file.")
    folder = os.path.dirname(os.path.abspath(path))
    name = os.path.splitext(os.path.basename(path))[0]
    if folder not in sys.path:
        sys.path.insert(0, folder)
    if name in sys.modules and getattr(sys.modules[name], "__file__", None) == os.path.abspath(path):
        return sys.modules[name]
    devices = host_devices(path)
    if devices > 1:
        provide_host_devices(path, devices)
    spec = importlib.util.spec_from_file_location(name, os.path.abspath(path))
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    try:
        spec.loader.exec_module(module)
    except Exception as exc:
        sys.modules.pop(name, None)
        raise StudyError(f"Study file {path!r} failed to import: {type(exc).__name__}: {_first_line(exc)}") from exc
    return module


def _check_call(path: str, i: int, fn: Any, args: tuple, kwargs: dict) -> None:
    """Arguments the function does not take are named before anything is traced."""
    try:
        sig = inspect.signature(fn.fun)
    except (TypeError, ValueError):  # a builtin or C callable: tracing will tell
        return
    try:
        sig.bind(*args, **kwargs)
    except TypeError as exc:
        raise StudyError(
            f"Study file {path!r}: examples()[{i}] passes arguments that {fn.key}{sig} does not take "
            f"({exc}); make its args and kwargs match the function."
        ) from None


def load_examples(path: str) -> list[Example]:
    """The (function, args[, kwargs]) tuples of a study file's ``examples()``.

    Raises:
        StudyError: the file does not import, has no ``examples()``, ``examples()`` raises
            or returns anything else than a non-empty list of such tuples with
            ``@at.autotuned`` functions, or an example's arguments do not fit its function.
    """
    module = load_module(path)
    make = getattr(module, "examples", None)
    if not callable(make):
        raise StudyError(
            f"Study file {path!r} has nothing to tune: define a function examples() returning "
            "[(fn, args)] or [(fn, args, kwargs)] with fn an @at.autotuned function. A function whose calls "
            "were recorded (AUTOTUNE_RECORD=1) needs no study file: `autotune sites --function KEY`, "
            "`autotune tune --recorded`."
        )
    try:
        items = make()
    except Exception as exc:
        raise StudyError(
            f"Study file {path!r}: examples() raised {type(exc).__name__}: {_first_line(exc)}. Fix "
            "examples() so it returns [(fn, args)] or [(fn, args, kwargs)]."
        ) from exc
    if not isinstance(items, (list, tuple)) or not items:
        raise StudyError(f"Study file {path!r}: examples() returned {items!r:.200}; it must return a non-empty list.")
    out = []
    for i, item in enumerate(items):
        if not isinstance(item, tuple) or len(item) not in (2, 3):
            raise StudyError(
                f"Study file {path!r}: examples()[{i}] must be (fn, args) or (fn, args, kwargs), got {item!r:.200}."
            )
        fn, args, *rest = item
        ctl = controller(fn)
        if ctl is None:
            raise StudyError(
                f"Study file {path!r}: examples()[{i}] names {getattr(fn, '__name__', fn)!r}, which is not "
                "an @at.autotuned function; decorate it with @at.autotuned."
            )
        kwargs = rest[0] if rest else {}
        if not isinstance(args, tuple) or not isinstance(kwargs, dict):
            raise StudyError(f"Study file {path!r}: examples()[{i}] args must be a tuple and kwargs a dict.")
        if ctl is not fn and hasattr(fn, "__self__"):  # instance.method: the instance is the first argument
            args = (fn.__self__, *args)
        _check_call(path, i, ctl, args, kwargs)
        out.append(Example(ctl, args, kwargs, i, path))
    return out
