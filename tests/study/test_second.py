"""autotune.study._second: when a confirmed lead must hold in a second, fresh process."""

from __future__ import annotations

import autotune as at
from autotune.select import Point
from autotune.study._second import SECOND_PROCESS_LEAD, lead_needed, second_process

DEFAULT = at.Config({})
UNROLL2 = at.Config({"l": {"repr": "scan", "unroll": 2}})
FOR = at.Config({"l": {"repr": "for"}})
RUNTIME = at.Objective(expected_calls=1e6)  # runtime decides: compile seconds are noise here


def P(config, compile_s, run_s, rounds=()):
    """A confirmed point: charged compile and run seconds and its paired rounds."""
    return Point(config, compile_s, run_s, rounds=rounds)


def test_second_process_names_every_contender_that_beats_the_default_while_the_lead_could_be_one_processs():
    def pt(config, run_s):
        return P(config, 0.1, run_s, [[0.1, run_s]] * 3)

    close = [pt(DEFAULT, 1e-3), pt(UNROLL2, 0.9e-3), pt(FOR, 0.95e-3)]
    assert second_process(close, DEFAULT, RUNTIME) == [UNROLL2, FOR]
    # A lead just under SECOND_PROCESS_LEAD in one round: both processes decide, and every beater goes.
    under = 1e-3 / SECOND_PROCESS_LEAD * 1.01
    shy = [pt(DEFAULT, 1e-3), P(UNROLL2, 0.1, 0.5e-3, [[0.1, 0.5e-3], [0.1, under], [0.1, 0.5e-3]]), pt(FOR, 0.9e-3)]
    assert second_process(shy, DEFAULT, RUNTIME) == [UNROLL2, FOR]
    # A lead of SECOND_PROCESS_LEAD or more in every paired round holds in any process: none.
    at_lead = 1e-3 / (SECOND_PROCESS_LEAD * 1.001)
    clear = [pt(DEFAULT, 1e-3), pt(UNROLL2, at_lead), pt(FOR, 1.1e-3)]
    assert second_process(clear, DEFAULT, RUNTIME) == []
    assert second_process([pt(DEFAULT, 1e-3), pt(UNROLL2, 1.2e-3)], DEFAULT, RUNTIME) == []


def test_a_lead_made_of_compile_seconds_needs_no_second_process_a_lead_made_of_calls_does():
    # Both run alike; the challenger compiles 0.2 s faster. At 1,000 calls its calls are 0.1 s of
    # its 0.9 s: 1.5 times slower they would still leave it ahead (0.95 s against 1.1 s), though its
    # whole cost leads by only 1.22x. At 100,000 calls the same lead is made of calls: not so.
    def pt(config, compile_s, run_s):
        return P(config, compile_s, run_s, [[compile_s, run_s]] * 3)

    points = [pt(DEFAULT, 1.0, 1e-4), pt(FOR, 0.8, 0.9e-4)]
    assert second_process(points, DEFAULT, at.Objective(expected_calls=1000)) == []
    assert second_process(points, DEFAULT, at.Objective(expected_calls=100_000)) == [FOR]


def test_one_rounds_compile_sample_does_not_send_a_lead_to_a_second_process():
    # The chip's case (accel_rnn, 10,000 calls): the challenger runs 1.24x faster and compiles
    # 0.1 s longer, a lead of 1.13x. One round's compile read 0.2 s high: paired round by round,
    # that round's lead fell under the TPU's 1.05x; the rounds' median compile settles it.
    objective = at.Objective(expected_calls=10_000)
    default = P(DEFAULT, 0.30, 172e-6, [[0.30, 172e-6]] * 3)
    noisy = P(UNROLL2, 0.40, 139e-6, [[0.40, 139e-6], [0.60, 139e-6], [0.40, 139e-6]])
    assert second_process([default, noisy], DEFAULT, objective, lead_needed("tpu")) == []
    # The calls are still paired: a round whose calls lose the lead sends it on.
    slow = P(UNROLL2, 0.40, 139e-6, [[0.40, 139e-6], [0.40, 160e-6], [0.40, 139e-6]])
    assert second_process([default, slow], DEFAULT, objective, lead_needed("tpu")) == [UNROLL2]


def test_a_platform_whose_runtimes_move_less_between_processes_needs_a_smaller_lead():
    def pt(config, run_s):
        return P(config, 0.1, run_s, [[0.1, run_s]] * 3)

    ahead = [pt(DEFAULT, 1e-3), pt(UNROLL2, 0.9e-3)]  # 1.11x: under the CPU's lead, over a TPU's
    assert lead_needed("tpu") < 1.11 < lead_needed("cpu") == SECOND_PROCESS_LEAD == lead_needed("gpu")
    assert second_process(ahead, DEFAULT, RUNTIME, lead_needed("cpu")) == [UNROLL2]
    assert second_process(ahead, DEFAULT, RUNTIME, lead_needed("tpu")) == []
