"""autotune/cli/_show.py: what ``autotune tune`` prints of a result's space: its size, and its two
stages where XLA's options were tried on the best loop configs."""

from __future__ import annotations

import types

import jax
import jax.numpy as jnp
import pytest
from _fake_runner import FakeRunner
from rich.console import Console

import autotune as at
from autotune.cli._show import show_result, space_text
from autotune.program._space import Space
from autotune.program._xla import choices, offered
from autotune.study._xla_search import XLA_TOP


def loop8(x):
    return at.loop(lambda c, _: (jnp.sin(c) * 0.5 + 1.0, None), x, length=8, name="l")[0]


X = jnp.ones(4)


def shown(result) -> str:
    out = Console(record=True, width=200)
    show_result(out, types.SimpleNamespace(key="test:loop8", cache=types.SimpleNamespace(display_url="c.db")), result)
    return out.export_text()


@pytest.mark.slow  # over 3.4 s: in `make test`, not `make test-fast`
def test_the_space_line_names_the_loop_configs_and_the_xla_stage(tmp_path):
    loops, options = len(Space(at.sites(loop8, X))), len(choices(offered("cpu", jax.devices()[0].device_kind)[0]))
    runner = FakeRunner(loop8, (X,), {"*": (0.5, 1e-4)})
    kw = {"sampler": "grid", "expected_calls": 100, "progress": False, "confirm_rounds": 1}
    r = at.tune(loop8, X, runner=runner, xla=True, storage=str(tmp_path / "s.db"), **kw)
    stage = XLA_TOP * (options - 1)
    assert r.space_size == len(r.trials) == loops + stage
    line = f"{len(r.trials)} trials (grid over a space of {loops + stage}: {loops} loop configs, then {stage} with XLA"
    assert space_text(r) == f"{loops + stage}: {loops} loop configs, then {stage} with XLA options on the best of them"
    assert line in shown(r)
    plain = at.tune(loop8, X, runner=FakeRunner(loop8, (X,)), xla=False, storage=str(tmp_path / "p.db"), **kw)
    assert f"{loops} trials (grid over a space of {loops}): " in shown(plain)
