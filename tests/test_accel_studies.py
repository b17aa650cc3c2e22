"""studies/accel_*.py: four studies sized for an accelerator by AUTOTUNE_STUDY_SIZE (``full``), small on the CPU.

Each is loaded the way ``autotune`` loads a study file (``_studyfile``: imported by its file stem,
its folder on sys.path), after the variable is set; the module is dropped from sys.modules before
and after, so a size never leaks into another test of the same process. The small size (the
default) is traced, compiled and run; the full size is only traced abstractly (``jax.eval_shape``
of ``examples()``, then the loop sites of those shapes): nothing of it is allocated or compiled.
"""

from __future__ import annotations

import sys

import jax
import numpy as np
import pytest
from _repo import ROOT

import autotune as at
from autotune.jit._decorator import controller
from autotune.record._studyfile import load_examples, load_module

ENV = "AUTOTUNE_STUDY_SIZE"
F32, BF16 = "float32", "bfloat16"

# stem -> (the loop's form, the text that opens it, expected_calls, dtype,
#          {size: (trip count, the example arguments' shapes)})
STUDIES = {
    "accel_rnn": (
        "scan",
        "lax.scan(",
        10_000,
        F32,
        {
            "small": (32, ({"b": (32,), "u": (16, 32), "w": (32, 32)}, (32, 4, 16))),
            "full": (256, ({"b": (512,), "u": (256, 512), "w": (512, 512)}, (256, 16, 256))),
        },
    ),
    "accel_tiny_scan": (
        "scan",
        "lax.scan(",
        100_000,
        F32,
        {"small": (32, ((32, 8), (32, 8))), "full": (4096, ((4096, 16), (4096, 16)))},
    ),
    "accel_bf16_layers": (
        "scan",
        "lax.scan(",
        10_000,
        BF16,
        {
            "small": (8, ({"b_in": (8, 256), "b_out": (8, 64), "w_in": (8, 64, 256), "w_out": (8, 256, 64)}, (16, 64))),
            "full": (
                24,
                (
                    {"b_in": (24, 4096), "b_out": (24, 1024), "w_in": (24, 1024, 4096), "w_out": (24, 4096, 1024)},
                    (256, 1024),
                ),
            ),
        },
    ),
    "accel_rk4": (
        "fori",
        "lax.fori_loop(",
        1_000,
        F32,
        {"small": (8, ((2, 8), ())), "full": (2000, ((2, 32), ()))},
    ),
}
STEMS = list(STUDIES)


def study_path(stem: str) -> str:
    return str(ROOT / "studies" / f"{stem}.py")


def loop_line(stem: str) -> int:
    """The line of the study's one loop: the site id names it."""
    opens = STUDIES[stem][1]
    lines = (ROOT / "studies" / f"{stem}.py").read_text().splitlines()
    [line] = [i for i, text in enumerate(lines, 1) if opens in text]
    return line


def shapes(tree):
    return jax.tree.map(lambda x: tuple(x.shape), tree)


def dtypes(tree) -> set[str]:
    return {str(x.dtype) for x in jax.tree.leaves(tree)}


@pytest.fixture
def fresh(monkeypatch):
    """``fresh(stem, size)``: the study's module name free in sys.modules, the size set (None: unset,
    the default), and the module dropped again at the end."""
    used = []

    def prepare(stem: str, size: str | None) -> str:
        if size is None:
            monkeypatch.delenv(ENV, raising=False)
        else:
            monkeypatch.setenv(ENV, size)
        sys.modules.pop(stem, None)
        used.append(stem)
        return study_path(stem)

    yield prepare
    for stem in used:
        sys.modules.pop(stem, None)


@pytest.mark.parametrize("stem", STEMS)
@pytest.mark.slow  # over 4 s: in `make test`, not `make test-fast`
def test_the_small_size_is_the_default_and_runs_as_jax_jit_does(fresh, stem):
    form, _, expected_calls, dtype, sizes = STUDIES[stem]
    length, arg_shapes = sizes["small"]
    [ex] = load_examples(fresh(stem, None))
    assert ex.fn.expected_calls == expected_calls
    assert shapes(ex.args) == arg_shapes
    assert dtypes(ex.args) == {dtype}
    [site] = ex.sites()
    assert site.id == f"{form}@{stem}.py:{loop_line(stem)}"
    assert (site.form, site.length) == (form, length)
    # The decorated function (no cache entry: the default config) gives what plain jax.jit gives.
    decorated = getattr(sys.modules[stem], ex.fn.__name__)
    out = jax.block_until_ready(decorated(*ex.args))
    ref = jax.block_until_ready(jax.jit(ex.fn.fun)(*ex.args))
    assert jax.tree.structure(out) == jax.tree.structure(ref)
    for got, want in zip(jax.tree.leaves(out), jax.tree.leaves(ref), strict=True):
        assert got.shape == want.shape and got.dtype == want.dtype
        got, want = np.asarray(got, np.float32), np.asarray(want, np.float32)
        assert np.all(np.isfinite(got))
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("stem", STEMS)
def test_the_full_size_has_the_accelerator_shapes(fresh, stem):
    """Read without allocating: examples() and the sites are traced on abstract values only."""
    form, _, _, dtype, sizes = STUDIES[stem]
    length, arg_shapes = sizes["full"]
    module = load_module(fresh(stem, "full"))
    args = jax.eval_shape(lambda: module.examples()[0][1])
    assert shapes(args) == arg_shapes
    assert dtypes(args) == {dtype}
    [fn] = [controller(v) for v in vars(module).values() if controller(v) is not None]
    [site] = at.sites(fn.fun, *args)
    assert (site.form, site.length) == (form, length)


@pytest.mark.parametrize("stem", STEMS)
def test_a_bad_size_is_one_sentence_naming_both_values(fresh, stem):
    with pytest.raises(at.StudyError) as exc:
        load_module(fresh(stem, "big"))
    text = str(exc.value)
    assert "\n" not in text
    assert "AUTOTUNE_STUDY_SIZE is 'big'" in text and "'small'" in text and "'full'" in text
