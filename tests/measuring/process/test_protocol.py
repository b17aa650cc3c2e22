"""Where a worker can import a function from."""

import os.path
import sys
import textwrap

import pytest

from autotune.measuring.process._protocol import PROTOCOL, Event, Location, Op, import_location, unwrap

MODULE = textwrap.dedent("""
    import jax.numpy as jnp
    import autotune as at

    @at.autotuned(static_argnums=1)
    def scaled(x, n):
        return x * n

    def plain(x):
        return x + 1

    class Model:
        @staticmethod
        def step(x):
            return x * 2

    def make():
        def inner(x):
            return x
        return inner
""")


@pytest.fixture
def module(tmp_path, monkeypatch):
    (tmp_path / "at_location_mod.py").write_text(MODULE)
    monkeypatch.syspath_prepend(str(tmp_path))
    import at_location_mod

    yield at_location_mod
    sys.modules.pop("at_location_mod", None)


def test_location_of_module_level_decorated_and_nested_functions(module):
    loc = Location.of(module.plain)
    assert loc == Location(module="at_location_mod", qualname="plain", file=module.__file__)
    assert Location.of(module.scaled.autotune.fun).qualname == "scaled"  # the wrapped function of @at.autotuned
    assert unwrap(module.scaled) is module.scaled.autotune.fun
    assert Location.of(module.Model.step).qualname == "Model.step"
    assert Location.of(module.make()) is None  # a closure: no importable name
    assert Location.of(lambda x: x) is None
    assert Location.from_dict(loc.to_dict()) == loc and loc.describe() == "at_location_mod:plain"


def test_import_location_finds_the_same_function_and_checks_the_file(module, tmp_path):
    assert import_location(Location.of(module.plain)) is module.plain
    assert import_location(Location("at_location_mod", "scaled")) is module.scaled.autotune.fun
    with pytest.raises(ImportError, match="not .*elsewhere.py"):
        import_location(Location("at_location_mod", "plain", file=str(tmp_path / "elsewhere.py")))


def test_study_file_locations_and_message_names():
    loc = Location.study_file("studies/seed_rollout.py", 2)
    assert loc.is_study_file and loc.index == 2 and os.path.isabs(loc.file)
    assert loc.describe().startswith("examples()[2] of ")
    assert PROTOCOL >= 2 and Op.TRIAL == "trial" and Event.LOWERED == "lowered"
