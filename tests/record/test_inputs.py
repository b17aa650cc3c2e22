"""A recorded call's arguments rebuilt (autotune/record/_inputs.py) from the record's JSON alone: the
stored values where their files are there, else values drawn from a seeded generator, with
every dtype, weak type and container the record names; what cannot be rebuilt is a `Skip`
naming the argument. (tests/record/test_replay.py records real calls and replays them.)"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from autotune.cache import PendingRecord
from autotune.record._inputs import MAX_WEAK_ELEMENTS, Skip, build_inputs


def record(args: list, kwargs: dict | None = None, files: list | None = None, **abstract) -> PendingRecord:
    tree = {"version": 1, "args": args, "kwargs": kwargs or {}, **abstract}
    values = None if files is None else {"files": files, "bytes": 0, "note": None}
    return PendingRecord("m:f", "fp", "sig", {}, {"module": "m", "qualname": "f"}, tree, {}, values=values)


def leaf(shape, dtype="float32", **more) -> dict:
    return {"shape": list(shape), "dtype": dtype, **more}


def test_every_dtype_is_drawn_in_its_documented_range_and_the_same_again(tmp_path):
    rec = record([leaf((64,)), leaf((64,), "int8"), leaf((64,), "bool"), leaf((64,), "complex64")])
    (f, i, b, z), kwargs, how = build_inputs(rec, str(tmp_path))
    assert how == "synthesized" and kwargs == {}
    assert f.dtype == jnp.float32 and 0.5 < float(jnp.std(f)) < 1.5  # standard normal
    assert i.dtype == jnp.int8 and int(i.min()) >= 0 and int(i.max()) < 8
    assert b.dtype == jnp.bool_ and 0 < int(b.sum()) < 64
    assert z.dtype == jnp.complex64 and float(jnp.abs(z.imag).sum()) > 0
    again = build_inputs(rec, str(tmp_path))[0]
    for x, y in zip((f, i, b, z), again):
        np.testing.assert_array_equal(x, y)  # one seeded generator per signature
    other = build_inputs(rec, str(tmp_path), seed=1)[0]
    assert not np.array_equal(f, other[0])


def test_stored_values_come_back_bit_for_bit_bfloat16_through_its_unsigned_view(tmp_path):
    x = jnp.linspace(-2.0, 2.0, 16, dtype=jnp.bfloat16)
    np.save(tmp_path / "a.npy", np.asarray(x).view(np.uint16))  # how the recorder stores bfloat16
    np.save(tmp_path / "b.npy", np.arange(6, dtype=np.float64).reshape(2, 3))
    rec = record([leaf((16,), "bfloat16"), leaf((2, 3), "float32")], files=["a.npy", "b.npy"])
    (a, b), _, how = build_inputs(rec, str(tmp_path))
    assert how == "recorded values"
    assert a.dtype == jnp.bfloat16 and np.array_equal(np.asarray(a).view(np.uint16), np.asarray(x).view(np.uint16))
    assert b.dtype == jnp.float32 and b.tolist() == [[0, 1, 2], [3, 4, 5]]  # cast to the recorded dtype


def test_one_missing_file_means_every_leaf_is_synthesized_not_a_mix(tmp_path):
    np.save(tmp_path / "a.npy", np.full(4, 7.0, np.float32))
    rec = record([leaf((4,)), leaf((4,))], files=["a.npy", "gone.npy"])
    (a, b), _, how = build_inputs(rec, str(tmp_path))
    assert how == "synthesized" and not np.all(np.asarray(a) == 7.0)


def test_a_leaf_without_a_stored_value_is_drawn_and_the_call_is_labelled_synthesized(tmp_path):
    np.save(tmp_path / "a.npy", np.full(4, 7.0, np.float32))
    rec = record([leaf((4,)), leaf((4,))], files=["a.npy", None])  # a leaf too large to keep
    (a, b), _, how = build_inputs(rec, str(tmp_path))
    assert how == "synthesized" and np.all(np.asarray(a) == 7.0) and b.shape == (4,)


def test_a_stored_value_of_another_shape_is_skipped_naming_the_argument(tmp_path):
    np.save(tmp_path / "a.npy", np.zeros(5, np.float32))
    rec = record([leaf((4,))], files=["a.npy"])
    with pytest.raises(Skip, match=r"the recorded value of argument 0 has shape \(5,\), not the recorded \(4,\)"):
        build_inputs(rec, str(tmp_path))


def test_weak_scalars_are_python_numbers_again_and_weak_arrays_are_weak(tmp_path):
    rec = record([leaf((), "float32", weak=True), leaf((), "int32", weak=True), leaf((3,), "float32", weak=True)])
    (f, i, arr), _, _ = build_inputs(rec, str(tmp_path))
    assert type(f) is float and type(i) is int
    assert arr.shape == (3,) and arr.weak_type  # a stack of weak scalars keeps the weak type
    big = record([leaf((MAX_WEAK_ELEMENTS + 1,), "float32", weak=True)])
    with pytest.raises(Skip, match=f"argument 0 is a weakly typed array of {MAX_WEAK_ELEMENTS + 1} elements"):
        build_inputs(big, str(tmp_path))


def test_prng_keys_are_split_from_key_zero_of_their_implementation(tmp_path):
    rec = record([leaf((3,), "key<fry>", key="threefry2x32")])
    (keys,), _, _ = build_inputs(rec, str(tmp_path))
    assert jax.dtypes.issubdtype(keys.dtype, jax.dtypes.prng_key) and keys.shape == (3,)
    data = np.asarray(jax.random.key_data(keys))
    assert len({tuple(row) for row in data}) == 3  # three distinct keys, not one repeated
    want = jax.random.split(jax.random.key(0, impl="threefry2x32"), 3)
    np.testing.assert_array_equal(data, np.asarray(jax.random.key_data(want)))


def test_containers_and_statics_are_rebuilt_as_recorded(tmp_path):
    tree = {"dict": [["a", {"tuple": [leaf((2,)), {"static": 3}]}], ["b", {"list": [leaf((1,), "int32")]}]]}
    rec = record([tree, {"static": "mode"}], kwargs={"scale": {"static": 0.5}})
    (d, mode), kwargs, _ = build_inputs(rec, str(tmp_path))
    assert sorted(d) == ["a", "b"] and isinstance(d["a"], tuple) and d["a"][1] == 3 and d["a"][0].shape == (2,)
    assert isinstance(d["b"], list) and d["b"][0].dtype == jnp.int32
    assert mode == "mode" and kwargs == {"scale": 0.5}


def test_what_the_record_could_not_hold_is_a_skip_naming_where(tmp_path):
    rec = record([leaf((2,)), {"tuple": [{"unrecordable": "mylib.Opts"}]}])
    with pytest.raises(Skip, match=r"argument 1\[0\] cannot be rebuilt \(it was recorded as mylib.Opts\)"):
        build_inputs(rec, str(tmp_path))
    for tree in ({"version": 2, "args": [], "kwargs": {}}, {"version": 1, "args": [], "kwargs": {}, "omitted": True}):
        rec = PendingRecord("m:f", "fp", "sig", {}, {}, tree, {})
        with pytest.raises(Skip, match="the record holds no argument tree this version can rebuild"):
            build_inputs(rec, str(tmp_path))
