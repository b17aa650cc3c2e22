"""Lazy package attributes: a name is imported from its module on first use (PEP 562).

``import autotune`` stays light (no SQLAlchemy, Optuna or tracing machinery) while
``at.Cache``, ``at.measure``... still work as plain attributes.

Example::

    __getattr__, __dir__ = lazy_attributes(__name__, {"Cache": "_cache"})
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable, Mapping


def lazy_attributes(package: str, table: Mapping[str, str]) -> tuple[Callable, Callable]:
    """The module-level ``__getattr__`` and ``__dir__`` of ``package``: each name of ``table``
    comes from the submodule it maps to (relative to ``package``), imported once."""

    def __getattr__(name: str):
        if name in table:
            value = getattr(importlib.import_module(f".{table[name]}", package), name)
            setattr(sys.modules[package], name, value)
            return value
        raise AttributeError(f"module {package!r} has no attribute {name!r}")

    def __dir__() -> list[str]:
        return sorted(set(vars(sys.modules[package])) | set(table))

    return __getattr__, __dir__
