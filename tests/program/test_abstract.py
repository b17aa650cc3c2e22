"""The JSON form of a call (autotune/program/_abstract.py): static values, the argument tree, and its
short readable form."""

from __future__ import annotations

import collections
import enum
import json
import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from autotune.program import _abstract
from autotune.program._abstract import Unrecordable, decode_value, describe, encode_value, short_signature


class Color(enum.Enum):
    RED = 1
    BLUE = 2


Pair = collections.namedtuple("Pair", "a b")


def act(x):
    return x


@pytest.mark.parametrize(
    "value",
    [
        None,
        True,
        3,
        -7,
        2.5,
        "name",
        (1, 2),
        [1, (2, "x")],
        {"a": 1, "b": (2.0,)},
        (),
        [],
        {},
        complex(1, -2),
        np.dtype("float32"),
        np.dtype("int8"),
        Color.BLUE,
        jnp.float32,
        act,
        jax.nn.relu,
    ],
)
def test_static_values_round_trip_through_json(value):
    text = json.dumps(encode_value(value, "argument 1"), allow_nan=False)
    back = decode_value(json.loads(text))
    assert type(back) is type(value) and repr(back) == repr(value)
    if callable(value) or isinstance(value, (np.dtype, Color)):
        assert back is value or back == value


def test_non_finite_floats_are_tagged():
    for v in (math.inf, -math.inf):
        assert decode_value(json.loads(json.dumps(encode_value(v, "x")))) == v
    assert math.isnan(decode_value(json.loads(json.dumps(encode_value(math.nan, "x")))))


@pytest.mark.parametrize("value", [object(), lambda x: x, frozenset({1}), np.float32(1.0), b"bytes"])
def test_what_json_cannot_hold_is_refused_by_name(value):
    with pytest.raises(Unrecordable, match=r"argument 2 \(opts\) is a .*cannot be stored as JSON"):
        encode_value(value, "argument 2 (opts)")


def traced_describe(fun, *args, static_argnums=(), **kwargs):
    """`describe` exactly as the decorator's traced path sees the arguments."""
    out = {}

    def probe(*a, **k):
        out["d"] = describe(fun, a, k)
        return 0

    jax.jit(probe, static_argnums=static_argnums).trace(*args, **kwargs)
    return out["d"]


def step(x, pair, n, *, scale=1.0):
    return x


def test_describe_keeps_tree_shapes_dtypes_weak_types_and_statics():
    x = jnp.ones((4, 3))
    abstract, why, leaves = traced_describe(
        step, x, Pair(jnp.zeros(2, jnp.int32), [jnp.bool_(True)]), 5, static_argnums=(2,), scale=2.0
    )
    assert why is None
    assert abstract == {
        "version": 1,
        "kwargs": {"scale": {"shape": [], "dtype": "float32", "weak": True}},
        "args": [
            {"shape": [4, 3], "dtype": "float32"},
            {
                "namedtuple": "test_abstract:Pair",
                "items": [{"shape": [2], "dtype": "int32"}, {"list": [{"shape": [], "dtype": "bool"}]}],
            },
            {"static": 5},
        ],
    }
    assert [p for p, _ in leaves] == [(0,), (1, 0), (1, 1, 0), ("scale",)]
    assert short_signature(abstract) == "(f32[4,3], Pair(i32[2], [bool[]]), 5, scale=f32~[])"


def test_dict_arguments_follow_jax_key_order_and_keys_arrays_name_their_impl():
    abstract, why, leaves = traced_describe(
        lambda d, k: d, {"b": jnp.ones(1), "a": jnp.ones(2)}, jax.random.split(jax.random.key(0), 3)
    )
    assert why is None
    assert abstract["args"][0] == {
        "dict": [["a", {"shape": [2], "dtype": "float32"}], ["b", {"shape": [1], "dtype": "float32"}]]
    }
    assert abstract["args"][1]["key"] == "threefry2x32" and abstract["args"][1]["shape"] == [3]
    assert [p for p, _ in leaves] == [(0, "a"), (0, "b"), (1,)]
    assert short_signature(abstract) == "({'a': f32[2], 'b': f32[1]}, key[3])"


@jax.tree_util.register_pytree_node_class
class Box:
    def __init__(self, v):
        self.v = v

    def tree_flatten(self):
        return (self.v,), None

    @classmethod
    def tree_unflatten(cls, aux, children):
        return cls(*children)


class Opts:
    def __hash__(self):
        return 1

    def __eq__(self, other):
        return isinstance(other, Opts)


def test_what_cannot_be_rebuilt_says_which_argument_and_why():
    _, why, _ = traced_describe(step, jnp.ones(2), Box(jnp.ones(2)), 1, static_argnums=(2,))
    assert why.startswith("argument 1 (pair) is a pytree of type test_abstract.Box, which cannot be rebuilt")
    abstract, why, _ = traced_describe(step, jnp.ones(2), (), Opts(), static_argnums=(2,))
    assert why.startswith("argument 2 (n) is a test_abstract.Opts, which cannot be stored as JSON")
    assert abstract["args"][2] == {"unrecordable": "test_abstract.Opts"}


def test_a_huge_tree_is_summarised_not_refused():
    abstract, why, _ = traced_describe(lambda xs: xs, [jnp.ones(1)] * 20000)
    assert abstract["omitted"] and "too large" in why
    assert short_signature(abstract) == "(...)"


def test_dtype_names_include_ml_dtypes():
    assert _abstract.dtype_named("bfloat16") == jnp.bfloat16
    assert _abstract.dtype_named("float32") == np.float32


def test_a_leaf_on_a_mesh_is_shown_and_makes_the_call_unreplayable():
    from jax.sharding import Mesh, NamedSharding
    from jax.sharding import PartitionSpec as P

    mesh = Mesh(np.array(jax.devices()[:1]).reshape(1), ("data",))
    x = jax.device_put(jnp.ones((4, 3)), NamedSharding(mesh, P("data")))
    abstract, why, _ = traced_describe(lambda a, b: a, x, jnp.ones(2))
    assert abstract["args"][0] == {"shape": [4, 3], "dtype": "float32", "mesh": "@mesh(data=1)"}
    assert why.startswith("argument 0 (a) is on a mesh (mesh(data=1)), which a replay cannot rebuild")
    assert short_signature(abstract) == "(f32[4,3]@mesh(data=1), f32[2])"
