"""cache/_store: the re-tune command an entry carries (one template per kind of caller, one
fill-in), and study outcomes counted by the one tally."""

import shlex

from autotune.cache._entry import fill_retune
from autotune.cache._store import CALLS, command_retune, python_retune
from autotune.measuring._outcome import Outcome, tally


def test_python_retune_template_fills_in_the_call_count():
    template = python_retune("step")
    assert template == "step.with_options(expected_calls={calls}).tune(*args)" and CALLS in template
    assert fill_retune(template, 5000.0) == "step.with_options(expected_calls=5000).tune(*args)"
    assert fill_retune(template, 37.5) == "step.with_options(expected_calls=37.5).tune(*args)"
    assert fill_retune(None, 10) is None


def test_command_retune_quotes_for_a_shell():
    template = command_retune(["tune", "--recorded", "--function", "app:roll out"])
    assert template == "autotune tune --recorded --function 'app:roll out' --expected-calls {calls}"
    assert shlex.split(fill_retune(template, 1e6))[-2:] == ["--expected-calls", "1000000"]


def test_tally_counts_states_in_the_order_first_seen():
    assert tally([Outcome.PRUNED, "complete", Outcome.COMPLETE, "running"]) == {
        "pruned": 1,
        "complete": 2,
        "running": 1,
    }
    assert tally([]) == {}
