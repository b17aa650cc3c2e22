"""The package's shape: no import cycle (deferred imports counted), `import autotune` stays
light, every module is one idea that fits one sitting, one Optuna importer, one SQLAlchemy importer."""

import ast
import os
import subprocess
import sys
import tomllib

import _repo
from _package_graph import ROOT, imports_of, modules

# A module is one idea, read in one sitting: at most this many lines, every line counted (the
# design's words: "every module <= 400 lines").
MAX_LINES = 400


def test_there_is_no_import_cycle_deferred_imports_counted():
    mods = modules()
    graph = {m: imports_of(m, p, set(mods)) for m, p in mods.items()}
    index, low, stack, on_stack, cycles, counter = {}, {}, [], set(), [], [0]

    def strongconnect(v):  # Tarjan's strongly connected components
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on_stack.add(v)
        for w in graph[v]:
            if w not in index:
                strongconnect(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                cycles.append(sorted(comp))

    sys.setrecursionlimit(10000)
    for v in graph:
        if v not in index:
            strongconnect(v)
    assert not cycles, f"import cycles: {cycles}"


def test_only_one_module_imports_optuna_and_only_the_cache_imports_sqlalchemy():
    mods = modules()
    optuna_users, sqlalchemy_users = [], []
    for name, path in mods.items():
        tree = ast.parse(open(path).read())
        for node in ast.walk(tree):
            names = (
                [a.name for a in node.names]
                if isinstance(node, ast.Import)
                else ([node.module or ""] if isinstance(node, ast.ImportFrom) and not node.level else [])
            )
            if any(n.split(".")[0] == "optuna" for n in names):
                optuna_users.append(name)
            if any(n.split(".")[0] == "sqlalchemy" for n in names):
                sqlalchemy_users.append(name)
    assert sorted(set(optuna_users)) == ["autotune.study._optuna"]
    assert sqlalchemy_users and all(n.startswith("autotune.cache.") for n in sqlalchemy_users), sqlalchemy_users


def test_every_module_is_one_idea_that_fits_one_sitting():
    mods = modules()
    lines = {name: len(open(path).read().splitlines()) for name, path in mods.items()}
    long = {name: n for name, n in lines.items() if n > MAX_LINES}
    assert not long, f"modules over {MAX_LINES} lines (split by idea, not by count): {long}"
    undocumented = [name for name, path in modules().items() if not ast.get_docstring(ast.parse(open(path).read()))]
    assert not undocumented, f"modules without a docstring that says what their one idea is: {undocumented}"


def test_import_autotune_loads_no_optuna_matplotlib_or_rich():
    code = (
        "import sys, autotune, autotune.cache, autotune.cli; "
        "print(sorted(m for m in ('optuna', 'matplotlib', 'rich') if m in sys.modules))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env=_repo.repo_env(),
        timeout=120,
    )
    assert out.returncode == 0, out.stderr
    loaded = eval(out.stdout.strip())
    assert "optuna" not in loaded and "matplotlib" not in loaded
    # rich is the CLI's table library: `import autotune` alone must not load it.
    bare = subprocess.run(
        [sys.executable, "-c", "import sys, autotune; print('rich' in sys.modules)"],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env=_repo.repo_env(),
        timeout=120,
    )
    assert bare.stdout.strip() == "False", bare.stderr


def test_the_license_is_an_spdx_string():
    # setuptools deprecates the `project.license` table: `pip install` must print no warning of ours.
    with open(os.path.join(ROOT, "pyproject.toml"), "rb") as f:
        project = tomllib.load(f)["project"]
    assert isinstance(project["license"], str)


# Public signatures fixed by docs/DESIGN.md (a keyword each: changing them breaks users' calls).
_PUBLIC_WIDE = {
    "autotune/jit/_decorator.py:autotuned",
    "autotune/study/_tune.py:tune",
    "autotune/measuring/_stages.py:measure",
}
# Internal functions allowed over 10 parameters until grouped into option values (none: keep it so).
_WIDE_TO_GROUP: set[str] = set()


def _parameter_counts():
    """(``path:Class.function``, its parameter count) of every function of the package: positional,
    keyword-only, ``*args`` and ``**kwargs`` one each, ``self`` and ``cls`` not counted."""
    for path in sorted(modules().values()):
        rel = os.path.relpath(path, ROOT).replace(os.sep, "/")
        with open(path, encoding="utf-8") as f:
            tree = ast.parse(f.read())
        stack = [(tree, "")]
        while stack:
            node, prefix = stack.pop()
            for child in ast.iter_child_nodes(node):
                if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    a = child.args
                    names = [x.arg for x in a.posonlyargs + a.args + a.kwonlyargs]
                    n = sum(x not in ("self", "cls") for x in names) + (a.vararg is not None) + (a.kwarg is not None)
                    yield f"{rel}:{prefix}{child.name}", n
                    stack.append((child, f"{prefix}{child.name}."))
                elif isinstance(child, ast.ClassDef):
                    stack.append((child, f"{prefix}{child.name}."))
                else:
                    stack.append((child, prefix))


def test_no_function_takes_more_than_ten_parameters():
    # Related parameters travel as one typed value (Objective, TuneOptions, Call, an options dataclass).
    wide = {name: n for name, n in _parameter_counts() if n > 10}
    unexpected = {name: n for name, n in wide.items() if name not in _PUBLIC_WIDE | _WIDE_TO_GROUP}
    assert not unexpected, "functions with more than 10 parameters: " + ", ".join(
        f"{name} ({n})" for name, n in sorted(unexpected.items())
    )
    fixed = _WIDE_TO_GROUP - set(wide)
    assert not fixed, f"no longer wide, remove from _WIDE_TO_GROUP: {sorted(fixed)}"


def _private_names(tree: ast.AST) -> tuple[set[str], set[str]]:
    """(private attribute names a module's classes define: methods, class attributes and ``self._x``
    assignments; private names it defines at top level)."""
    attrs, top = set(), set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ClassDef):
            for item in node.body:
                if isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    attrs.add(item.name)
                elif isinstance(item, (ast.Assign, ast.AnnAssign)):
                    targets = item.targets if isinstance(item, ast.Assign) else [item.target]
                    attrs.update(t.id for t in targets if isinstance(t, ast.Name))
        elif isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store):
            if isinstance(node.value, ast.Name) and node.value.id in ("self", "cls"):
                attrs.add(node.attr)
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            top.add(node.name)
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            top.update(t.id for t in targets if isinstance(t, ast.Name))
    private = lambda names: {n for n in names if n.startswith("_") and not n.startswith("__")}  # noqa: E731
    return private(attrs), private(top)


# Private attributes of other libraries' objects that the package reads on purpose (also the name of
# an attribute of its own somewhere): Optuna's trial id, which its storage calls take and no public
# attribute gives (study/_optuna and study/_trials wrap Optuna).
_THIRD_PARTY = {"_trial_id"}
# A named tuple's own methods: public API spelled with an underscore (so they cannot clash with fields).
_THIRD_PARTY |= {"_replace", "_asdict", "_fields", "_make"}


def private_reads() -> list[str]:
    """Every place a module of the package reads another module's private name: ``from m import _x``
    of a name (not a module), ``m._x`` of a module ``m``'s private name, and ``obj._x`` of a private
    attribute that only other modules' classes define (``self`` and ``cls`` are the class's own)."""
    mods = modules()
    trees = {name: ast.parse(open(path, encoding="utf-8").read(), path) for name, path in mods.items()}
    defined = {name: _private_names(tree) for name, tree in trees.items()}
    found = []
    for name, tree in trees.items():
        own_attrs = defined[name][0]
        aliases: dict[str, str] = {}  # a local name -> the package module it is
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("autotune"):
                for alias in node.names:
                    full = f"{node.module}.{alias.name}"
                    if full in mods:
                        aliases[alias.asname or alias.name] = full
                    elif alias.name.startswith("_") and not alias.name.startswith("__") and node.module != name:
                        found.append(f"{name}:{node.lineno}: from {node.module} import {alias.name}")
        for node in ast.walk(tree):
            if not isinstance(node, ast.Attribute) or not node.attr.startswith("_") or node.attr.startswith("__"):
                continue
            base = node.value
            if isinstance(base, ast.Name) and base.id in aliases:
                module = aliases[base.id]
                if f"{module}.{node.attr}" not in mods and node.attr in defined[module][1]:
                    found.append(f"{name}:{node.lineno}: {ast.unparse(node)}")
                continue
            if isinstance(base, ast.Name) and base.id in ("self", "cls"):
                continue
            owners = [m for m, (attrs, _) in defined.items() if node.attr in attrs]
            if owners and node.attr not in own_attrs and node.attr not in _THIRD_PARTY:
                found.append(f"{name}:{node.lineno}: {ast.unparse(node)} (defined by {', '.join(owners)})")
    return found


def test_no_module_reads_another_modules_private_names():
    found = private_reads()
    assert not found, "private names read across modules (make them public where they belong): " + "; ".join(found)


def test_only_the_decorator_module_names_the_decorator_object():
    """What hangs off the decorator takes values and callables: no other module imports `Autotuned`
    (not even for type checking), and no function outside it takes the object as ``ctl``."""
    importers, takers = [], []
    for name, path in modules().items():
        if name == "autotune.jit._decorator":
            continue
        for node in ast.walk(ast.parse(open(path, encoding="utf-8").read(), path)):
            if isinstance(node, ast.ImportFrom) and any(a.name == "Autotuned" for a in node.names):
                importers.append(f"{name}:{node.lineno}")
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                if any(a.arg == "ctl" for a in node.args.args + node.args.kwonlyargs):
                    takers.append(f"{name}:{node.name}")
    assert not importers, f"modules that import Autotuned: {importers}"
    assert not takers, f"functions that take the decorator object: {takers}"
