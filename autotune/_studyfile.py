"""Load a study file: plain Python defining @at.autotuned functions and ``examples()``."""

from __future__ import annotations

import importlib.util
import os
import sys
from dataclasses import dataclass, field
from typing import Any

from ._decorator import Autotuned, controller
from ._errors import StudyError


@dataclass
class Example:
    """One function and the inputs to tune it on."""

    fn: Autotuned
    args: tuple
    kwargs: dict[str, Any] = field(default_factory=dict)


def load_module(path: str):
    """Import ``path`` as a module named after its file stem (its folder goes on sys.path),
    so function keys match an ordinary ``import`` of the same file."""
    if not os.path.isfile(path):
        raise StudyError(f"Study file {path!r} does not exist; pass the path of a .py file such as studies/seed_rollout.py.")
    if not path.endswith(".py"):
        raise StudyError(f"Study file {path!r} is not a .py file.")
    folder = os.path.dirname(os.path.abspath(path))
    name = os.path.splitext(os.path.basename(path))[0]
    if folder not in sys.path:
        sys.path.insert(0, folder)
    if name in sys.modules and getattr(sys.modules[name], "__file__", None) == os.path.abspath(path):
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, os.path.abspath(path))
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    try:
        spec.loader.exec_module(module)
    except Exception as exc:
        sys.modules.pop(name, None)
        raise StudyError(f"Study file {path!r} failed to import: {type(exc).__name__}: {exc}") from exc
    return module


def load_examples(path: str) -> list[Example]:
    """The (function, args[, kwargs]) tuples of a study file's ``examples()``."""
    module = load_module(path)
    make = getattr(module, "examples", None)
    if not callable(make):
        raise StudyError(
            f"Study file {path!r} has nothing to tune: define a function examples() returning "
            "[(fn, args)] or [(fn, args, kwargs)] with fn an @at.autotuned function."
        )
    items = make()
    if not isinstance(items, (list, tuple)) or not items:
        raise StudyError(f"Study file {path!r}: examples() returned {items!r}; it must return a non-empty list.")
    out = []
    for i, item in enumerate(items):
        if not isinstance(item, tuple) or len(item) not in (2, 3):
            raise StudyError(f"Study file {path!r}: examples()[{i}] must be (fn, args) or (fn, args, kwargs), got {item!r:.200}.")
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
        out.append(Example(ctl, args, kwargs))
    return out
