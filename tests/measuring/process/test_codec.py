"""Arrays and argument trees cross to the worker as JSON, never pickled."""

import json
import os

import jax.numpy as jnp
import numpy as np
import pytest
from _repo import python

from autotune.measuring.process._codec import (
    SPILL_BYTES,
    NotPortable,
    array_leaves,
    decode_array,
    decode_tree,
    digest,
    encode_array,
    encode_tree,
    remove,
    spill_dir,
    spilled,
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


def test_a_large_array_travels_as_a_file_the_reader_deletes():
    import ml_dtypes

    for a in (np.arange(1 << 18, dtype=np.float32), np.ones((512, 1024), ml_dtypes.bfloat16)):
        assert a.nbytes >= SPILL_BYTES
        d = encode_array(a)
        assert set(d) == {"dtype", "file"} and os.path.dirname(d["file"]) == spill_dir()
        back = decode_array(json.loads(json.dumps(d)))
        assert back.dtype == a.dtype and np.array_equal(back, a)
        assert not os.path.exists(d["file"])  # read once, then gone
    assert "file" not in encode_array(np.ones(SPILL_BYTES // 8 - 64))  # small ones stay in the line


def test_the_spill_folder_is_the_parents_its_workers_share_and_goes_with_it(tmp_path):
    # A parent makes its folder on first use and removes it at exit, files a killed reader left
    # included; a worker it starts is handed the same folder.
    (tmp_path / "say_spill.py").write_text(
        "import json, os\nprint(json.dumps({'event': 'spill', 'dir': os.environ['AUTOTUNE_SPILL_DIR']}), flush=True)\n"
    )
    code = (
        "import sys, time, numpy as np\n"
        "from autotune.measuring.process._codec import encode_array, spill_dir\n"
        "from autotune.measuring.process._channel import WorkerProcess, worker_env\n"
        "left = encode_array(np.ones(1 << 20))['file']\n"  # never read
        f"w = WorkerProcess(sys.executable, worker_env({{'PYTHONPATH': {str(tmp_path)!r}}}), module='say_spill')\n"
        "said = w.read(time.monotonic() + 60)\n"
        "print(spill_dir(), left, said['dir'], flush=True)\n"
        "w.kill()\n"
    )
    r = python("-c", code)
    assert r.returncode == 0, r.stderr[-2000:]
    folder, left, theirs = r.stdout.split()
    assert theirs == folder and os.path.dirname(left) == folder and not os.path.exists(folder)


def test_a_message_sent_again_keeps_its_files_until_its_writer_removes_them():
    # The arguments go to every worker a runner starts (one that ran out of memory is replaced):
    # their files outlive a read, and the runner removes them when it goes.
    big = np.arange(1 << 18, dtype=np.float32)
    message = {"op": "load", "args": encode_tree([[big, 1.5], {"w": big}], keep=True)}
    paths = spilled(json.loads(json.dumps(message)))
    assert len(paths) == 2 and all(os.path.exists(p) for p in paths)
    for _ in range(2):  # two workers read it
        args, kwargs = decode_tree(message["args"])
        assert np.array_equal(args[0], big) and args[1] == 1.5 and np.array_equal(kwargs["w"], big)
    assert all(os.path.exists(p) for p in paths)
    remove(paths)
    assert not any(os.path.exists(p) for p in paths)
