"""Export mode, the parent's side: trace and lower here (timed: the trial's ``trace_s`` and
``lower_s``), serialise the program with ``jax.export``, and build the worker's request.

Only the lowered program crosses, so closures work. A multi-device program crosses too:
its arguments go with their meshes and shardings (``_shardings``), and the worker places
them on the devices with the same ids before it compiles. Programs ``jax.export`` cannot
serialise (host callbacks, custom calls without a stability guarantee, several devices
that the arguments do not name), or would change (closed-over constants ``jax.jit`` passes as
arguments, jax >= 0.12, which ``jax.export`` embeds), raise :class:`CannotExport`; the runner then imports the
function in the worker instead (when it has a :class:`~autotune.measuring.process.Location`) or
measures in-process.
"""

from __future__ import annotations

import base64
import inspect
import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from autotune._errors import error_text
from autotune.measuring._runner import TrialFailed
from autotune.measuring._sampling import Sampling
from autotune.measuring._stages import Stages, compile_call, dynamic_args, jit_option_set, lowered_figures
from autotune.measuring.process._codec import encode_array, spilled
from autotune.measuring.process._protocol import Mode, Op
from autotune.measuring.process._shardings import encode_sharding
from autotune.program._call import Call
from autotune.program._config import Config
from autotune.program._xla import jit_options


class CannotExport(Exception):
    """``jax.export`` cannot carry this program to a worker; the message says why."""


@dataclass
class Exported:
    """A config traced, lowered and exported in the parent. ``out_tree`` is the output tree
    the worker's flat outputs are rebuilt into."""

    stages: Stages
    exported: Any = None
    request: dict[str, Any] | None = None
    out_tree: Any = None


def _export_flat(stages: Stages, leaves: list, platforms: tuple[str, ...] | None = None):
    """The same program exported with a plain calling convention: flat array inputs and
    outputs. ``jax.export`` can serialise only pytrees it knows, so a method of an
    ``eqx.Module`` or a ``flax.struct`` dataclass (``self`` traced) crosses this way.
    ``leaves`` (the call's dynamic leaves) give each input the sharding it has in the call."""
    import jax

    from autotune.program import _compat

    run, avals = _compat.jaxpr_function(stages.traced.jaxpr)
    if len(leaves) != len(avals):
        leaves = [None] * len(avals)
    structs = [
        jax.ShapeDtypeStruct(
            a.shape, a.dtype, weak_type=getattr(a, "weak_type", False), sharding=_committed_sharding(x)
        )
        for a, x in zip(avals, leaves)
    ]
    exported = jax.export.export(jax.jit(lambda *xs: run(*xs)), platforms=platforms)(*structs)
    return exported, exported.serialize()


def trace_and_lower(
    call: Call, config: Config, on_stage: Callable[[str, Stages], None], platform: str | None = None
) -> Stages:
    """Trace and lower ``call`` under ``config`` cold in this process, checking ``on_stage`` after
    each stage; for ``platform`` when the worker runs on another one than this process (None: this one's)."""
    try:
        return compile_call(
            call,
            config,
            compile=False,
            platforms=(platform,) if platform else None,
            on_traced=lambda st: on_stage("trace", st),
            on_lowered=lambda st: on_stage("lower", st),
        )
    except (TrialFailed, KeyboardInterrupt):
        raise
    except Exception as exc:  # the config does not trace or lower: a result, the worker stays
        raise TrialFailed("error", error_text(exc, first_line=False)) from exc


def export(stages: Stages, call: Call, sampling: Sampling, platform: str | None = None) -> Exported:
    """Serialise the lowered program of ``call`` and build the trial request (without its ``id``; its
    runtime sampled as ``sampling`` says), for ``platform`` (None: this process's).

    Raises:
        CannotExport: with the reason, for a program that cannot cross as ``jax.export`` bytes.
    """
    import jax

    from autotune.program import _compat

    if stages.hoisted_constants:
        # XLA folds an embedded constant (a schedule's sines, say) and cannot fold an argument:
        # the worker would time a program the decorator's jax.jit never runs (10x apart, measured).
        raise CannotExport(
            f"jax.jit passes its {stages.hoisted_constants} closed-over constant(s) larger than "
            "jax_embedded_constants_max_bytes to the program as arguments, and jax.export would embed "
            "them, so the worker would measure another program"
        )
    flat, platforms = False, (platform,) if platform else None
    leaves, tree = jax.tree_util.tree_flatten(call.dynamic())
    with _compat.no_persistent_cache():
        try:
            try:
                exported = jax.export.export(stages.jitted, platforms=platforms)(*call.args, **call.kwargs)
                program = exported.serialize()
            except Exception as exc:
                if "pytree" not in str(exc).lower():
                    raise
                exported, program = _export_flat(stages, leaves, platforms)
                flat = True
        except Exception as exc:
            why = f"jax.export cannot serialize it ({error_text(exc)})"
            if isinstance(exc, ImportError):
                why += "; `pip install flatbuffers` enables worker isolation"
            raise CannotExport(why) from exc
    devices = getattr(exported, "nr_devices", 1)
    named = {d for x in leaves if _committed_sharding(x) is not None for d in x.sharding.device_set}
    if devices != 1 or len(named) > 1:
        if len(named) != devices:  # the worker gets its devices from the arguments' shardings only
            raise CannotExport(
                f"the program runs on {devices} device(s) and its arguments are committed to "
                f"{len(named)}, so the devices come from elsewhere (a mesh in the function)"
            )
    if (not flat and tree != exported.in_tree) or len(leaves) != len(exported.in_avals):
        raise CannotExport("its arguments do not flatten like the exported program's inputs")
    out_tree = jax.tree_util.tree_structure(stages.traced.out_info) if flat else exported.out_tree
    request = {
        "op": Op.TRIAL,
        "mode": Mode.EXPORT,
        "program": base64.b64encode(bytes(program)).decode("ascii"),
        **lowered_figures(stages),
        "donate": donated_leaves(call),
        # the config's XLA options merged with the user's (compile_call): the worker compiles with them
        "compiler_options": jit_options(stages.xla, call.jit_kwargs).get("compiler_options"),
        "sampling": sampling.to_dict(),
        "keep_outputs": True,
    }
    return Exported(stages, exported, request, out_tree)


def _committed_sharding(x: Any) -> Any:
    import jax

    return x.sharding if isinstance(x, jax.Array) and getattr(x, "committed", False) else None


def call_leaves(call: Call) -> list:
    """The dynamic leaves of a call as they are (placed where the user has them)."""
    import jax

    return jax.tree_util.tree_leaves(call.dynamic())


def args_message(exported: Any, call: Call) -> tuple[bytes, list, list[str]]:
    """The ``load_args`` request line (the exported program's flat inputs, each with its
    sharding when committed), those arrays, and the files the large ones were spilled to (kept
    for every worker the line goes to: the caller removes them). Raises ``NotPortable`` for a
    sharding that cannot cross."""
    leaves = call_leaves(call)
    shardings = [encode_sharding(x, f"argument leaf {i}") for i, x in enumerate(leaves)]
    arrays = [np.asarray(x, dtype=aval.dtype) for x, aval in zip(leaves, exported.in_avals)]
    encoded = [encode_array(a, keep=True) for a in arrays]
    leaves = [d if s is None else {**d, "sharding": s} for d, s in zip(encoded, shardings)]
    line = json.dumps({"op": Op.LOAD_ARGS, "leaves": leaves}) + "\n"
    return line.encode(), arrays, spilled(encoded)


def outputs_of(exported: Any, encoded: list, out_tree: Any = None) -> Any:
    """The outputs the worker sent back, in the function's output tree."""
    import jax

    from autotune.measuring.process._codec import decode_array

    tree = out_tree if out_tree is not None else exported.out_tree
    outputs = [decode_array(d) for d in encoded or []]
    if outputs or tree.num_leaves == 0:
        return jax.tree_util.tree_unflatten(tree, outputs)
    return outputs


def donated_leaves(call: Call) -> list[int]:
    """Flat indices of the dynamic leaves ``jax.jit`` would donate (donate_argnums/argnames
    resolved through the signature as jit does; static arguments are not leaves)."""
    import jax

    fn, args, kwargs, jit_kwargs = call.function, call.args, call.kwargs, call.jit_kwargs

    nums, names = jit_option_set(jit_kwargs, "donate_argnums"), jit_option_set(jit_kwargs, "donate_argnames")
    if not nums and not names:
        return []
    n = len(args)
    try:
        params = list(inspect.signature(fn).parameters.values())
    except (TypeError, ValueError):
        params = []
    positional = [p.name for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    nums = {i % n if n and i < 0 else i for i in nums}
    names |= {positional[i] for i in nums if i < len(positional)}
    nums |= {i for i, name in enumerate(positional) if name in names}
    # Which positions and names survive as dynamic arguments, in order.
    kept, kept_kw = dynamic_args(fn, tuple(range(n)), {k: k for k in kwargs}, jit_kwargs)
    out, k = [], 0
    for i in kept:
        count = len(jax.tree_util.tree_leaves(args[i]))
        if i in nums:
            out.extend(range(k, k + count))
        k += count
    for name in kept_kw:
        count = len(jax.tree_util.tree_leaves(kwargs[name]))
        if name in names:
            out.extend(range(k, k + count))
        k += count
    return out
