"""The package's modules and the imports between them (deferred imports counted), read from the
source with ``ast``: tests/test_package.py and tests/test_architecture.py check the graph."""

import ast
import os

import _repo

ROOT = str(_repo.ROOT)
PACKAGE = os.path.join(ROOT, "autotune")


def modules() -> dict[str, str]:
    """Module name -> file path, for every module of the package."""
    out = {}
    for folder, _, files in os.walk(PACKAGE):
        for f in files:
            if f.endswith(".py"):
                rel = os.path.relpath(os.path.join(folder, f), ROOT)[:-3].replace(os.sep, ".")
                out[rel[: -len(".__init__")] if rel.endswith(".__init__") else rel] = os.path.join(folder, f)
    return out


def imports_of(name: str, path: str, known: set[str]) -> dict[str, int]:
    """Every package module ``name`` imports, at module level or inside functions, with the line
    of its first import."""
    is_package = path.endswith("__init__.py")
    base = name.split(".") if is_package else name.split(".")[:-1]
    found: dict[str, int] = {}
    tree = ast.parse(open(path).read())
    # `if TYPE_CHECKING:` imports never run: a type named there is no import (jit/'s modules type
    # their handle as `Autotuned` so). Deferred imports inside functions do count.
    typing_only = {
        id(n)
        for block in ast.walk(tree)
        if isinstance(block, ast.If) and getattr(block.test, "id", getattr(block.test, "attr", None)) == "TYPE_CHECKING"
        for stmt in block.body
        for n in ast.walk(stmt)
    }
    for node in ast.walk(tree):
        if id(node) in typing_only:
            continue
        targets = []
        if isinstance(node, ast.Import):
            targets = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                parent = ".".join(base[: len(base) - node.level + 1])
                mod = f"{parent}.{node.module}" if node.module else parent
            else:
                mod = node.module or ""
            targets = [f"{mod}.{a.name}" if f"{mod}.{a.name}" in known else mod for a in node.names]
        for t in targets:
            while t and t not in known:
                t = t.rpartition(".")[0]
            if t:
                found[t] = min(found.get(t, node.lineno), node.lineno)
                # importing a.b.c runs the __init__ of a.b first (but a module's own packages have already started)
                parts = t.split(".")
                for k in range(1, len(parts)):
                    pkg = ".".join(parts[:k])
                    if pkg in known and not name.startswith(pkg + ".") and pkg != name:
                        found[pkg] = min(found.get(pkg, node.lineno), node.lineno)
    own_packages = {".".join(name.split(".")[:k]) for k in range(1, len(name.split(".")) + 1)}
    return {t: line for t, line in found.items() if t not in own_packages}
