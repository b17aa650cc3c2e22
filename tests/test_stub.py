"""``autotune/__init__.pyi``: the typed stub names every public name, each the object ``autotune`` gives,
and the package ships it (with the ``py.typed`` marker)."""

from __future__ import annotations

import ast
import importlib
import tomllib

import _repo

import autotune

STUB = _repo.ROOT / "autotune" / "__init__.pyi"


def _stub_imports() -> dict[str, tuple[str, str]]:
    """Public name -> (defining module, name there), as the stub imports them."""
    out = {}
    for node in ast.parse(STUB.read_text()).body:
        if isinstance(node, ast.ImportFrom):
            for alias in node.names:
                out[alias.asname or alias.name] = (node.module, alias.name)
    return out


def test_the_stub_declares_exactly_the_public_names():
    assert sorted(_stub_imports()) == sorted(autotune.__all__)


def test_each_stub_name_is_the_object_the_package_gives():
    for name, (module, attr) in _stub_imports().items():
        assert getattr(importlib.import_module(module), attr) is getattr(autotune, name), name


def test_the_package_ships_the_stub_and_the_marker():
    assert (_repo.ROOT / "autotune" / "py.typed").is_file()
    data = tomllib.loads((_repo.ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["package-data"]
    assert {"py.typed", "*.pyi"} <= set(data["autotune"])
