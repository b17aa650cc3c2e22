"""The package's shape: no import cycle (deferred imports counted), `import autotune` stays
light, every module is one idea that fits one sitting, one Optuna importer, one SQLAlchemy importer."""

import ast
import os
import subprocess
import sys
import tomllib

import _repo

ROOT = str(_repo.ROOT)
PACKAGE = os.path.join(ROOT, "autotune")
# A module is one idea, read in one sitting: at most this many lines of code. Docstrings, comments
# and blank lines do not count, so explaining a module never forces a split of it.
MAX_CODE_LINES = 400


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
    for node in ast.walk(ast.parse(open(path).read())):
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
    # _paths shows URLs (redacted) for the study storage as well as the cache: it parses them with SQLAlchemy.
    assert all(n.startswith("autotune.cache") or n == "autotune._paths" for n in sqlalchemy_users), sqlalchemy_users


def code_lines(path: str) -> int:
    """The lines of ``path`` that hold code: not blank, not a comment, not inside a docstring."""
    text = open(path).read()
    tree = ast.parse(text)
    doc_lines: set[int] = set()
    for node in ast.walk(tree):
        body = getattr(node, "body", None)
        if isinstance(body, list) and body and isinstance(body[0], ast.Expr):
            value = body[0].value
            if isinstance(value, ast.Constant) and isinstance(value.value, str):
                doc_lines.update(range(body[0].lineno, body[0].end_lineno + 1))
    return sum(
        1
        for number, line in enumerate(text.splitlines(), 1)
        if line.strip() and not line.strip().startswith("#") and number not in doc_lines
    )


def test_code_lines_skip_docstrings_comments_and_blanks(tmp_path):
    f = tmp_path / "m.py"
    f.write_text('"""Doc.\n\nMore."""\n\n# why\nimport os\n\n\ndef g():\n    """Doc."""\n    return os\n')
    assert code_lines(str(f)) == 3


def test_every_module_is_one_idea_that_fits_one_sitting():
    long = {name: n for name, path in modules().items() if (n := code_lines(path)) > MAX_CODE_LINES}
    assert not long, f"modules over {MAX_CODE_LINES} lines of code (split by idea, not by count): {long}"
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
