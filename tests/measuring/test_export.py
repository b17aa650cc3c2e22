"""Export mode's parent side: trace and lower here, serialise, and which leaves are donated."""

import base64

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import autotune as at
from autotune.measuring._export import CannotExport, args_message, donated_leaves, export, outputs_of, trace_and_lower
from autotune.measuring._runner import TrialFailed, stage_guard
from autotune.program._config import Config


def step(x, n, *, bias):
    return {"y": at.loop(lambda c, _: (c * 0.5 + bias, None), x, length=4, name="l")[0] * n}


ARGS, KWARGS, JIT = (jnp.ones(3), 2), {"bias": jnp.float32(1.0)}, {"static_argnums": 1, "donate_argnums": 0}
STEP = at.Call(step, ARGS, KWARGS, JIT)


def test_a_config_is_traced_lowered_and_exported_with_its_timings_and_hash():
    st = trace_and_lower(STEP, Config({"l": {"repr": "for"}}), stage_guard(None))
    assert st.compiled is None and st.trace_s > 0 and st.lower_s > 0 and len(st.program_hash) == 64
    ex = export(st, STEP, {"target_s": 0.01})
    req = ex.request
    assert req["mode"] == "export" and req["program_hash"] == st.program_hash
    assert (req["trace_s"], req["lower_s"]) == (st.trace_s, st.lower_s) and req["donate"] == [0]
    program = jax.export.deserialize(bytearray(base64.b64decode(req["program"])))
    assert program.in_tree == ex.exported.in_tree
    line, arrays = args_message(ex.exported, STEP)
    assert line.endswith(b"\n") and [a.shape for a in arrays] == [(3,), ()]
    tree = outputs_of(ex.exported, [{"dtype": "float32", "npy": _npy(np.zeros(3, np.float32))}])
    assert set(tree) == {"y"}


def _npy(a):
    from autotune.measuring._codec import encode_array

    return encode_array(a)["npy"]


def test_a_config_that_does_not_trace_is_an_error_result():
    with pytest.raises(TrialFailed) as info:
        trace_and_lower(STEP, Config({"nope": {"repr": "scan"}}), stage_guard(None))
    assert info.value.state == "error" and "'nope'" in info.value.reason


def test_host_callbacks_cannot_be_exported():
    def doubled(x):
        return jax.pure_callback(lambda a: np.asarray(a) * 2, jax.ShapeDtypeStruct(x.shape, x.dtype), x)

    call = at.Call(doubled, (jnp.ones(2),))
    st = trace_and_lower(call, Config(), stage_guard(None))
    with pytest.raises(CannotExport, match="host_callbacks"):
        export(st, call, {})


@pytest.mark.parametrize(
    "jit_kwargs, want",
    [
        ({}, []),
        ({"donate_argnums": 0}, [0, 1]),  # both leaves of the tuple argument
        ({"donate_argnums": (2,)}, [2]),  # n (argument 1) is static: c's leaf is index 2
        ({"donate_argnames": "c"}, [2]),  # by name, resolved through the signature
        ({"donate_argnums": -1}, [2]),
        ({"donate_argnames": ("pair", "k")}, [0, 1, 3]),  # k is passed by keyword
    ],
)
def test_donated_leaves_follow_jit(jit_kwargs, want):
    def f(pair, n, c, *, k):
        return pair[0] + pair[1] + c * n + k

    args, kwargs = ((jnp.ones(2), jnp.ones(2)), 3, jnp.ones(2)), {"k": jnp.ones(2)}
    jit_kwargs = {"static_argnums": 1, **jit_kwargs}
    assert donated_leaves(at.Call(f, args, kwargs, jit_kwargs)) == want
