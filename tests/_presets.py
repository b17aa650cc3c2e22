"""Timing presets for tests: measure as little as tells the behaviour apart (tests check what
happens, never how fast; speed lives in benchmarks/bench.py).

    >>> from _presets import FAST
    >>> fn.tune(x, timing=FAST)
"""

# The `timing=` of tune / InProcessRunner / WorkerRunner: about 10 ms of runs a point.
FAST = {"target_s": 0.01, "min_reps": 3, "warmup": 1}
# Twice as long, for tests whose outcome depends on telling two configs apart (a study's winner).
STEADY = {"target_s": 0.02, "min_reps": 3, "warmup": 1}
# The `autotune tune` command's equivalent.
CLI_FAST = ("--run-seconds", "0.02")
# Confirmation at its least, the cheapest contender beside the default in one round, for tests of
# what a study does around it (storage, resuming, workers, messages): the default three contenders
# in three rounds are up to 12 more compiles, more than such a test's trials. tests/study/test_confirm.py
# and the tests of a winner keep the defaults. `tune(**ONE_ROUND)`; ONE_ROUND_CLI for the command.
ONE_ROUND = {"confirm_top": 1, "confirm_rounds": 1}
ONE_ROUND_CLI = ("--confirm-top", "1", "--confirm-rounds", "1")
# at.measure's keywords, `min_reps` left to each test (several set their own).
MEASURE_FAST = {"target_s": 0.01, "warmup": 1}
