"""Arrays and argument trees cross to the worker as JSON, never pickled."""

import json

import jax.numpy as jnp
import numpy as np
import pytest

from autotune.measuring.process._codec import (
    NotPortable,
    array_leaves,
    decode_array,
    decode_tree,
    digest,
    encode_array,
    encode_tree,
)


def test_arrays_cross_as_npy_without_pickle():
    for a in (
        np.float32(3.5),
        np.arange(6, dtype=np.int64).reshape(2, 3),
        np.asarray(jnp.ones((2, 2), jnp.bfloat16)),
        np.array([True, False]),
        np.zeros((0, 3), np.complex64),
        np.arange(10.0)[::3],
    ):
        d = encode_array(a)
        assert json.loads(json.dumps(d)) == d
        back = decode_array(d)
        assert back.dtype == a.dtype and back.shape == a.shape and np.array_equal(back, a)
    with pytest.raises(TypeError, match="object arrays"):
        encode_array(np.array([object()]))


def test_a_pickled_payload_is_refused():
    import base64
    import io

    buf = io.BytesIO()
    np.save(buf, np.array([{"a": 1}], dtype=object), allow_pickle=True)
    with pytest.raises(ValueError, match="allow_pickle"):
        decode_array({"dtype": "object", "npy": base64.b64encode(buf.getvalue()).decode()})


def test_argument_trees_round_trip_with_their_containers_and_array_kinds():
    tree = [
        (jnp.arange(3.0), np.ones(2, np.int8), 2.5, 3, True, None, "mode"),
        {"bias": jnp.float32(0.5), "scale": jnp.asarray(1.0), "nested": [jnp.zeros((2, 2), jnp.bfloat16)]},
    ]
    wire = json.loads(json.dumps(encode_tree(tree)))
    back = decode_tree(wire)
    assert isinstance(back, list) and isinstance(back[0], tuple) and isinstance(back[1]["nested"], list)
    assert back[0][2:] == (2.5, 3, True, None, "mode") and type(back[0][3]) is int
    import jax

    assert isinstance(back[0][0], jax.Array) and isinstance(back[0][1], np.ndarray)  # each kind stays itself
    assert back[1]["scale"].aval.weak_type and not back[1]["bias"].aval.weak_type  # weak types survive
    assert back[1]["nested"][0].dtype == jnp.bfloat16
    assert digest(array_leaves(back)) == digest(array_leaves(tree))


def test_values_that_cannot_cross_say_what_they_are():
    class Params:
        pass

    with pytest.raises(NotPortable, match="Params"):
        encode_tree((jnp.ones(2), Params()))
    with pytest.raises(NotPortable, match="non-string keys"):
        encode_tree({1: jnp.ones(2)})
    with pytest.raises(NotPortable, match="weakly typed array of shape"):
        encode_tree(jnp.broadcast_to(jnp.asarray(1.0), (3,)))


def test_a_committed_array_comes_back_on_its_device_and_a_missing_device_is_named():
    import jax

    from autotune.measuring.process._shardings import decode_sharding, encode_sharding, placement

    device = jax.devices()[0]
    pinned = jax.device_put(jnp.arange(4.0), device)
    wire = json.loads(json.dumps(encode_tree({"pinned": pinned, "loose": jnp.ones(2), "host": np.ones(3)})))
    assert wire["dict"]["pinned"]["sharding"] == {
        "kind": "single",
        "device": device.id,
        "platform": device.platform,
        "memory_kind": "device",
    }
    assert "sharding" not in wire["dict"]["loose"] and "sharding" not in wire["dict"]["host"]
    back = decode_tree(wire)
    assert back["pinned"].committed and back["pinned"].sharding == pinned.sharding
    assert not back["loose"].committed  # jit places it, as it places the user's
    assert placement([pinned, jnp.ones(2), np.ones(3)]) == {
        "devices": [device.id],
        "bytes_per_device": 16,
        "loose_bytes": 8 + 24,
    }
    elsewhere = dict(encode_sharding(pinned), device=device.id + 64)
    with pytest.raises(NotPortable, match=r"device ids \[\d+\], but this process sees 1 cpu device"):
        decode_sharding(elsewhere)
    mesh = {"devices": [device.id + 64], "shape": [1], "axes": ["data"], "axis_types": None, "platform": "cpu"}
    with pytest.raises(NotPortable, match="device ids"):
        decode_tree(
            {
                "array": encode_array(np.ones(2)),
                "jax": True,
                "sharding": {"kind": "named", "mesh": mesh, "spec": ["data"], "memory_kind": None},
            }
        )
