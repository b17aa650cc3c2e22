"""The suite's own schedule: the longest files first (tests/conftest.py's LONGEST_FIRST), an order
pytest-xdist keeps only with --no-loadscope-reorder (without it, the files holding the most tests
go first and the slow end-to-end files, which hold few, run last in one process alone)."""

import re

from _repo import ROOT
from conftest import LONGEST_FIRST


def test_every_file_named_longest_first_exists():
    missing = [name for name in LONGEST_FIRST if not (ROOT / "tests" / name).is_file()]
    assert not missing, f"renamed or removed: {missing}; update LONGEST_FIRST in tests/conftest.py"


def test_the_makefile_keeps_the_order_under_xdist():
    makefile = (ROOT / "Makefile").read_text()
    [xdist] = re.findall(r"^XDIST = .*$", makefile, flags=re.M)
    assert "--dist loadfile" in xdist and "--no-loadscope-reorder" in xdist, xdist
