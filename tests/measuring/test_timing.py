"""How a call's runtime is sampled (`autotune.measuring._timing`): a sampling that may stop early
stops after ``min_reps`` samples once every one is over its ``stop_above_s``, and not before."""

from __future__ import annotations

import time

import pytest

from autotune.measuring._sampling import Sampling
from autotune.measuring._timing import time_calls


def counted(seconds: float):
    """A call that takes about ``seconds`` (a sleep, so load does not shorten it), and its count."""
    calls = [0]

    def call():
        calls[0] += 1
        time.sleep(seconds)
        return 1.0

    return call, calls


@pytest.mark.timing  # two measured figures of one call compared: a loaded sibling delays the sleeps' wake-ups
@pytest.mark.parametrize("mode", ["steady", "blocking"])
def test_a_call_over_the_ceiling_stops_after_min_reps_samples(mode):
    # 0.6 s of 2 ms calls is 10 or more samples of at least 20 ms; stopped, it is 3
    sampling = Sampling(mode=mode, warmup=1, min_reps=3, target_s=0.6)
    full_call, full_calls = counted(0.002)
    full = time_calls(full_call, sampling)
    short_call, short_calls = counted(0.002)
    short = time_calls(short_call, sampling.replace(stop_above_s=0.001))
    assert short.stopped and not full.stopped
    assert short_calls[0] * 2 < full_calls[0]  # a short estimate: far fewer calls than the full sampling
    assert short.run_s == pytest.approx(full.run_s, rel=0.5)  # and about the same figure


def test_a_call_under_the_ceiling_samples_in_full():
    call, _ = counted(0.001)
    t = time_calls(call, Sampling(warmup=1, min_reps=5, target_s=0.1, stop_above_s=1.0))
    assert not t.stopped and t.reps >= 5
