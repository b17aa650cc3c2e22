"""The suite's files: no test file imports another (shared helpers live in ``tests/_*.py`` support
modules), so each test file can be run, moved or deleted on its own."""

import ast
import re
from pathlib import Path

TESTS = Path(__file__).resolve().parent
# An import of a test module in a script a test hands to a subprocess (a string in the file).
IN_A_SCRIPT = re.compile(r"^\s*(from\s+test_\w*\s+import|import\s+test_)", re.MULTILINE)


def imported_test_modules(path: Path) -> list[str]:
    """``"line: module"`` for every import of a ``test_*`` module in ``path``: statements at any
    depth, and lines of the scripts the file writes out as strings."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        names = []
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and not node.level:
            names = [node.module or ""]
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) and IN_A_SCRIPT.search(node.value):
            names = [m.group(0).strip() for m in IN_A_SCRIPT.finditer(node.value)]
        found += [f"{node.lineno}: {n}" for n in names if n.split(".")[0].startswith("test_") or " test_" in n]
    return found


def test_no_test_file_imports_another_test_file():
    files = [p for p in sorted(TESTS.glob("**/test_*.py")) if p.name != Path(__file__).name]  # its examples: strings
    assert files, TESTS
    offenders = {str(p.relative_to(TESTS)): got for p in files if (got := imported_test_modules(p))}
    assert not offenders, f"move the shared helpers into a tests/_*.py support module: {offenders}"


def test_the_check_sees_an_import_in_a_statement_a_function_and_a_script(tmp_path):
    path = tmp_path / "test_example.py"
    path.write_text(
        "import os\nfrom test_cache import make_entry\n\ndef f():\n    import test_confirm\n\n"
        'SCRIPT = """\nimport sys\nfrom test_pending import make_record\n"""\n'
    )
    assert [line.split(": ")[1] for line in imported_test_modules(path)] == [
        "test_cache",
        "test_confirm",
        "from test_pending import",
    ]
