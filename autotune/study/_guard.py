"""The correctness guard: a config that changes the program's results never wins.

Each output leaf is compared with the default config's in its own dtype family:

* integers and booleans: exactly;
* complex numbers: the real and the imaginary parts, each as a float of the part's dtype;
* floats (``float64`` ... ``float16``, ``bfloat16``, ``float8_*``): non-finite values by
  position (NaN where the default has NaN; +inf and -inf where it has them, with the same
  sign), then the finite values twice:

  - element by element: ``|c - r| <= element_rtol * (|r| + scale / 10)``, where ``scale``
    is the largest finite ``|r|`` of the leaf (so a value that cancels to nearly zero is
    judged against the leaf's magnitude, not its own);
  - as a whole: ``||c - r|| / ||r|| <= max(norm_rtol, 1.5 * eps / sqrt(n))`` over the n
    finite values: a systematic change (every value x1.01) shows up here even where it is
    below one element's rounding.

The tolerances (:data:`TOLERANCES`) admit the re-association unrolling lets XLA do and
reject a x1.01 change, except where one ulp is already larger than 1% (``bfloat16``
scalars, ``float8_*``): there a x1.01 change is below the dtype's resolution.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

# dtype name -> (element rtol, norm rtol)
TOLERANCES: dict[str, tuple[float, float]] = {
    "float64": (1e-9, 1e-10),
    "float32": (2e-4, 1e-4),
    "float16": (1e-2, 5e-3),
    "bfloat16": (4e-2, 6e-3),
    "float8_e4m3fn": (0.25, 0.06),
    "float8_e4m3fnuz": (0.25, 0.06),
    "float8_e4m3b11fnuz": (0.25, 0.06),
    "float8_e4m3": (0.25, 0.06),
    "float8_e5m2": (0.5, 0.12),
    "float8_e5m2fnuz": (0.5, 0.12),
    "float8_e3m4": (0.12, 0.03),
    "float8_e8m0fnu": (1.0, 0.5),
    "float4_e2m1fn": (1.0, 0.5),
}


def _float_kind(dtype: np.dtype) -> str | None:
    """'float' for real floating dtypes (ml_dtypes ones included), 'complex', 'exact', or None."""
    if dtype.kind == "c":
        return "complex"
    if dtype.kind == "f" or dtype.name in TOLERANCES or dtype.name.startswith(("float8", "float4", "float6")):
        return "float"
    if dtype.kind in "biu":
        return "exact"
    return None


def _eps(dtype: np.dtype) -> float:
    try:
        import ml_dtypes

        return float(ml_dtypes.finfo(dtype).eps)
    except Exception:  # numpy's own floats, or ml_dtypes missing
        return float(np.finfo(dtype).eps)


def tolerance(dtype: Any) -> tuple[float, float]:
    """(element rtol, norm rtol) of a float dtype; unknown floats get 2 ulps / 0.5 ulp."""
    dtype = np.dtype(dtype)
    if dtype.name in TOLERANCES:
        return TOLERANCES[dtype.name]
    eps = _eps(dtype)
    return 2 * eps, eps / 2


def _same_bits(r: np.ndarray, c: np.ndarray) -> bool:
    """Whether two arrays of one dtype and shape hold the same bytes (a training step's new
    parameters are often identical across loop configs; comparing them as float64 is seconds a GB)."""

    def raw(a: np.ndarray) -> memoryview:
        return memoryview(np.ascontiguousarray(a).reshape(-1).view(np.uint8))

    return raw(r) == raw(c)


def _compare_floats(
    i: int,
    part: str,
    r: np.ndarray,
    c: np.ndarray,
    dtype: np.dtype,
    rtol: float | None,
    atol: float | None,
    scale: float | None = None,
) -> str | None:
    # 16-bit floats are compared in float32, which holds them exactly and rounds a difference far
    # below their tolerance (half the memory and time of float64 on a model's parameters).
    work = np.float32 if np.dtype(dtype).itemsize <= 2 else np.float64
    rw, cw = r.astype(work), c.astype(work)
    where = f"output leaf {i}{part}"
    r_nan, c_nan = np.isnan(rw), np.isnan(cw)
    if not np.array_equal(r_nan, c_nan):
        k = int(np.argmax(r_nan != c_nan))
        return (
            f"{where} has NaN where the default config's has {float(rw.flat[k])}, or the reverse "
            f"(first at flat index {k})"
        )
    r_inf, c_inf = np.isinf(rw), np.isinf(cw)
    if not np.array_equal(r_inf, c_inf) or not np.array_equal(np.sign(rw[r_inf]), np.sign(cw[c_inf])):
        bad = (r_inf != c_inf) | (r_inf & c_inf & (np.sign(rw) != np.sign(cw)))
        k = int(np.argmax(bad))
        return f"{where} is {float(cw.flat[k])} where the default config's is {float(rw.flat[k])} (flat index {k})"
    finite = ~(r_nan | r_inf)
    if not finite.any():
        return None
    rf, cf = rw[finite], cw[finite]
    elem_rtol, norm_rtol = tolerance(dtype)
    if rtol is not None:
        elem_rtol = norm_rtol = float(rtol)
    slack = float(atol) if atol is not None else 0.0
    scale = float(np.max(np.abs(rf))) if scale is None else scale
    diff = np.abs(cf - rf)
    limit = elem_rtol * (np.abs(rf) + scale / 10) + slack
    if (diff > limit).any():
        k = int(np.argmax(diff - limit))
        return (
            f"{where} differs from the default config's by {diff[k]:.3g} at one value ({cf[k]:.6g} vs "
            f"{rf[k]:.6g}), over the {dtype.name} tolerance {limit[k]:.3g}"
        )
    norm_r = float(np.linalg.norm(rf))
    norm_d = float(np.linalg.norm(cf - rf))
    if norm_r == 0.0:
        return (
            None
            if norm_d <= slack * math.sqrt(rf.size)
            else (f"{where} is not zero where the default config's is (norm {norm_d:.3g})")
        )
    bound = max(norm_rtol, 1.5 * _eps(dtype) / math.sqrt(rf.size)) if rtol is None else norm_rtol
    rel = norm_d / norm_r
    if rel > bound + slack * math.sqrt(rf.size) / norm_r:
        return (
            f"{where} differs from the default config's by {rel:.3g} relative to its norm, over the "
            f"{dtype.name} tolerance {bound:.3g} (a systematic change, not rounding)"
        )
    return None


def compare_outputs(reference: Any, candidate: Any, rtol: float | None = None, atol: float | None = None) -> str | None:
    """None if ``candidate`` matches ``reference`` under the rules above, else why not.

    Arguments:
        reference: the default config's outputs (a pytree of arrays).
        candidate: another config's outputs.
        rtol: replaces both relative tolerances of every float dtype (None: the table).
        atol: an absolute slack added to every float comparison (None: none).

    Returns:
        None, or one sentence naming the first leaf that differs and by how much.

    Example::

        >>> import numpy as np
        >>> compare_outputs(np.ones(8, np.float16), np.ones(8, np.float16) * np.float16(1.5)) is None
        False
    """
    import jax

    ref_leaves = jax.tree_util.tree_leaves(reference)
    cand_leaves = jax.tree_util.tree_leaves(candidate)
    if len(ref_leaves) != len(cand_leaves):
        return f"outputs have {len(cand_leaves)} leaves, the default config's have {len(ref_leaves)}"
    for i, (r, c) in enumerate(zip(ref_leaves, cand_leaves)):
        r, c = np.asarray(r), np.asarray(c)
        if r.shape != c.shape or r.dtype != c.dtype:
            return f"output leaf {i} is {c.dtype}{list(c.shape)}, the default's is {r.dtype}{list(r.shape)}"
        if r.size == 0 or _same_bits(r, c):  # identical bits pass every check below: skip their passes
            continue
        kind = _float_kind(r.dtype)
        if kind == "complex":
            part_dtype = np.real(r).dtype
            finite = np.abs(r)[np.isfinite(r)]
            scale = float(finite.max()) if finite.size else 0.0  # both parts judged on |z|'s magnitude
            for part, fn in ((" (real part)", np.real), (" (imaginary part)", np.imag)):
                why = _compare_floats(i, part, fn(r), fn(c), part_dtype, rtol, atol, scale)
                if why:
                    return why
        elif kind == "float":
            why = _compare_floats(i, "", r, c, r.dtype, rtol, atol)
            if why:
                return why
        elif not np.array_equal(r, c):
            k = int(np.argmax((r != c).reshape(-1)))
            return (
                f"output leaf {i} ({r.dtype}) differs from the default config's at flat index {k}: "
                f"{c.reshape(-1)[k].item()} vs {r.reshape(-1)[k].item()} ({r.dtype} must match exactly)"
            )
    return None
