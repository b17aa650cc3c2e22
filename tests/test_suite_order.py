"""The suite's own schedule: the longest files first (tests/conftest.py's LONGEST_FIRST), an order
pytest-xdist keeps only with --no-loadscope-reorder (without it, the files holding the most tests
go first and the slow end-to-end files, which hold few, run last in one process alone)."""

import re

from _repo import ROOT
from conftest import LONGEST_FIRST


def test_every_file_named_longest_first_exists():
    present = {p.name for p in (ROOT / "tests").rglob("test_*.py")}
    missing = [name for name in LONGEST_FIRST if name not in present]
    assert not missing, f"renamed or removed: {missing}; update LONGEST_FIRST in tests/conftest.py"


def test_the_makefile_keeps_the_order_under_xdist():
    makefile = (ROOT / "Makefile").read_text()
    [xdist] = re.findall(r"^XDIST = .*$", makefile, flags=re.M)
    assert "--dist loadfile" in xdist and "--no-loadscope-reorder" in xdist, xdist


def test_the_tests_are_laid_out_like_the_package():
    """tests/<package>/ holds the tests of autotune/<package>/; a test file's name is unique in
    the suite (pytest imports test files by their name)."""
    tests = ROOT / "tests"
    packages = {p.name for p in (ROOT / "autotune").iterdir() if (p / "__init__.py").is_file()}
    folders = {p.name for p in tests.iterdir() if p.is_dir() and any(p.glob("test_*.py"))}
    assert folders <= packages, f"test folders that name no package of autotune: {sorted(folders - packages)}"
    names = [p.name for p in tests.rglob("test_*.py")]
    assert len(names) == len(set(names)), sorted(n for n in names if names.count(n) > 1)
