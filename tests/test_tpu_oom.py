"""scripts/tpu_oom.py, the device script, run as its CPU twin (``--cpu``: small sizes, the worker
capped at 0.75 GiB): a config over the cap fails in one line, the study finishes, the winner fits."""

from __future__ import annotations

import re

import pytest
from _repo import ROOT, python


@pytest.mark.slow
def test_the_cpu_twin_prints_the_failed_trials_line_and_a_winner_that_fits():
    r = python(ROOT / "scripts" / "tpu_oom.py", "--cpu", timeout=600)
    assert r.returncode == 0, (r.stdout, r.stderr[-3000:])
    lines = r.stdout.splitlines()
    (over,) = [ln for ln in lines if ln.startswith("out of memory: ") and " steps=for: " in ln]
    assert "ran out of memory while running: the config asks for 1.00 GiB of device memory, the worker" in over
    # The claim is "a winner that fits", not which one: configs of the same size (fori×2 and
    # scan×2, 0.13 GiB each) are ordered by the CPU's timing, and no default stands in the way
    # (``for`` ran out of memory), so the cheapest that ran wins.
    (winner,) = [ln for ln in lines if ln.startswith("winner: ")]
    found = re.match(r"winner: (\S+) \(([\d.]+) GiB of device memory\)", winner)
    assert found, winner
    config, asked = found.group(1), float(found.group(2))
    fits = {ln.split(": ")[1].split(" ")[-1]: ln.rsplit(": ", 1)[1] for ln in lines if ln.startswith("fits: trial ")}
    assert config in fits and fits[config] == f"{asked:.2f} GiB", (winner, fits)
    assert asked <= 0.75 and config != "steps=for", winner
