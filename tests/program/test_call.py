"""at.Call: a function, its example arguments and jax.jit options as one value, read by every runner."""

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import autotune as at
from autotune.measuring._sampling import Sampling
from autotune.measuring._stages import measure_executable


def scaled(x, n, *, bias):
    return at.loop(lambda c, _: (c * 0.5 + bias, None), x, length=4, name="l")[0] * n


def test_a_call_keeps_its_parts_as_a_tuple_and_fresh_dicts():
    kwargs, jit_kwargs = {"bias": 1.0}, {"static_argnums": 1}
    call = at.Call(scaled, [jnp.ones(3), 2], kwargs, jit_kwargs)
    assert call.function is scaled and isinstance(call.args, tuple) and call.args[1] == 2
    kwargs["bias"], jit_kwargs["donate_argnums"] = 9.0, 0  # the caller's dicts are not the call's
    assert call.kwargs == {"bias": 1.0} and call.jit_kwargs == {"static_argnums": 1}
    assert at.Call(scaled).args == () and at.Call(scaled, (), None, None).kwargs == {}


def test_a_call_is_frozen_and_compared_by_identity():
    call = at.Call(scaled, (jnp.ones(3), 2))
    with pytest.raises(dataclasses.FrozenInstanceError):
        call.args = ()
    assert call == call and call != at.Call(scaled, call.args)
    assert {call: 1}[call] == 1  # hashable, though it holds arrays and dicts


def test_dynamic_drops_the_static_arguments_and_donating_follows_jit():
    x = jnp.ones(3)
    call = at.Call(scaled, (x, 2), {"bias": jnp.float32(1.0)}, {"static_argnums": 1, "donate_argnums": 0})
    args, kwargs = call.dynamic()
    assert len(args) == 1 and args[0] is x and set(kwargs) == {"bias"}
    assert call.donating and not at.Call(scaled, (x, 2)).donating


def test_a_call_that_is_not_callable_says_so():
    with pytest.raises(TypeError, match="pass the function to measure"):
        at.Call((jnp.ones(3),))


def test_a_call_is_measured_as_jax_jit_runs_it():
    x = jnp.arange(3.0)
    call = at.Call(scaled, (x, 3), {"bias": jnp.float32(1.0)}, {"static_argnums": 1})
    unrolled = at.Config({"l": {"repr": "for"}})
    m, exe = measure_executable(call, unrolled, sampling=Sampling(target_s=0.01), keep_outputs=True)
    want = jax.jit(scaled, static_argnums=1)(x, 3, bias=jnp.float32(1.0))
    np.testing.assert_allclose(m.outputs, want, rtol=1e-6)
    assert exe is not None and m.compile_s > 0


def test_runners_take_a_call_and_refuse_loose_arguments():
    with pytest.raises(TypeError, match="autotune.Call"):
        at.InProcessRunner(scaled, (jnp.ones(3), 2))
    with at.InProcessRunner(at.Call(scaled, (jnp.ones(3), 2), {"bias": 1.0}, {"static_argnums": 1})) as runner:
        assert runner.call.args[1] == 2 and runner.measure({}).run_s > 0
