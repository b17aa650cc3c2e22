"""scripts/tpu_oom.py, the device script, run as its CPU twin (``--cpu``: small sizes, the worker
capped at 0.75 GiB): a config over the cap fails in one line, the study finishes, the winner fits."""

from __future__ import annotations

import pytest
from _repo import ROOT, python


@pytest.mark.slow
def test_the_cpu_twin_prints_the_failed_trials_line_and_a_winner_that_fits():
    r = python(ROOT / "scripts" / "tpu_oom.py", "--cpu", timeout=600)
    assert r.returncode == 0, (r.stdout, r.stderr[-3000:])
    lines = r.stdout.splitlines()
    (over,) = [ln for ln in lines if ln.startswith("out of memory: ") and " steps=for: " in ln]
    assert "ran out of memory while running: the config asks for 1.00 GiB of device memory, the worker" in over
    (winner,) = [ln for ln in lines if ln.startswith("winner: ")]
    assert winner.startswith(("winner: steps=scan×1 (0.06 GiB", "winner: steps=scan×2 (0.13 GiB")), winner
