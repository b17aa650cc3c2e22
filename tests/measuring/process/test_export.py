"""Export mode's parent side: trace and lower here, serialise, and which leaves are donated."""

import base64

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from _hoisting import EMBEDDING, HOISTING, TABLE_STUDY, run_python

import autotune as at
from autotune.measuring._runner import TrialFailed, stage_guard
from autotune.measuring._sampling import Sampling
from autotune.measuring.process._export import (
    CannotExport,
    args_message,
    donated_leaves,
    export,
    outputs_of,
    trace_and_lower,
)
from autotune.program._config import Config


def step(x, n, *, bias):
    return {"y": at.loop(lambda c, _: (c * 0.5 + bias, None), x, length=4, name="l")[0] * n}


ARGS, KWARGS, JIT = (jnp.ones(3), 2), {"bias": jnp.float32(1.0)}, {"static_argnums": 1, "donate_argnums": 0}
STEP = at.Call(step, ARGS, KWARGS, JIT)


def test_a_config_is_traced_lowered_and_exported_with_its_timings_and_hash():
    st = trace_and_lower(STEP, Config({"l": {"repr": "for"}}), stage_guard(None))
    assert st.compiled is None and st.trace_s > 0 and st.lower_s > 0 and len(st.program_hash) == 64
    ex = export(st, STEP, Sampling(target_s=0.01))
    req = ex.request
    assert req["mode"] == "export" and req["program_hash"] == st.program_hash
    assert (req["trace_s"], req["lower_s"]) == (st.trace_s, st.lower_s) and req["donate"] == [0]
    program = jax.export.deserialize(bytearray(base64.b64decode(req["program"])))
    assert program.in_tree == ex.exported.in_tree
    line, arrays, files = args_message(ex.exported, STEP)
    assert line.endswith(b"\n") and [a.shape for a in arrays] == [(3,), ()] and files == []  # small: inline
    tree = outputs_of(ex.exported, [{"dtype": "float32", "npy": _npy(np.zeros(3, np.float32))}])
    assert set(tree) == {"y"}


def _npy(a):
    from autotune.measuring.process._codec import encode_array

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
        export(st, call, Sampling())


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


@pytest.mark.slow  # over 4 s: in `make test`, not `make test-fast`
def test_a_program_whose_constants_jit_passes_as_arguments_is_not_exported(tmp_path):
    """jax.export embeds the constants jax.jit hoists, and XLA folds only embedded ones: the worker
    would time another program than the decorator runs (demo_unroll's `for` on jax 0.12.1: 16 µs
    exported against 200 µs under jax.jit). Without hoisting the same program is exported."""
    (tmp_path / "table_study.py").write_text(TABLE_STUDY)
    code = """
import sys
from autotune.measuring.process._export import CannotExport, export, trace_and_lower
from autotune.measuring._runner import stage_guard
from autotune.measuring._sampling import Sampling
from autotune.program._config import Config
from autotune.record._studyfile import load_examples
import autotune as at
(ex,) = load_examples(sys.argv[1])
call = at.Call(ex.fn.fun, ex.args)
st = trace_and_lower(call, Config({"l": {"repr": "for"}}), stage_guard(None))
try:
    print("exported", st.hoisted_constants, export(st, call, Sampling()).request["mode"])
except CannotExport as exc:
    print("refused", st.hoisted_constants, exc)
"""
    path = str(tmp_path / "table_study.py")
    hoisted = run_python(code, path, env=HOISTING).split()
    assert hoisted[0] == "refused" and int(hoisted[1]) >= 1, hoisted
    assert "closed-over constant(s) larger than jax_embedded_constants_max_bytes" in " ".join(hoisted)
    embedded = run_python(code, path, env=EMBEDDING).split()
    assert embedded == ["exported", "0", "export"], embedded
