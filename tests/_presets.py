"""Timing presets for tests: measure as little as tells the behaviour apart (tests check what
happens, never how fast; speed lives in scripts/bench.py).

    >>> from _presets import FAST
    >>> fn.tune(x, timing=FAST)
"""

# The `timing=` of tune / InProcessRunner / WorkerRunner: about 10 ms of runs a point.
FAST = {"target_s": 0.01, "min_reps": 3, "warmup": 1}
# Twice as long, for tests whose outcome depends on telling two configs apart (a study's winner).
STEADY = {"target_s": 0.02, "min_reps": 3, "warmup": 1}
# The `autotune tune` command's equivalent.
CLI_FAST = ("--run-seconds", "0.02")
# at.measure's keywords, `min_reps` left to each test (several set their own).
MEASURE_FAST = {"target_s": 0.01, "warmup": 1}
