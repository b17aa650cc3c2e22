"""Checkpointed (``jax.checkpoint`` / ``jax.remat``) calls: their policies, the function each
checkpoints, and a trace-time override of the policy of chosen calls.

Part of the ``_compat`` layer (re-exported there). A checkpointed call is known by the function
it checkpoints (:func:`checkpoint_key`: where that function is defined): the same key names the
equation ``jax.checkpoint`` binds and the copy partial evaluation stages into the backward pass.
Two calls of one function share a key (and a policy). The policy decides,
when JAX differentiates the call, which residuals the forward pass saves; under a ``jax.grad``
that runs inside the traced function that happens during the trace, so a policy is changed by
re-tracing under :func:`policy_override`, which rewrites the ``policy`` argument of the chosen
calls' ``bind`` before any differentiation rule reads it. Only that argument is touched.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator, Mapping
from typing import Any

import jax

from autotune.program._config import POLICIES

_JAX_NAMES = {
    "nothing": "nothing_saveable",
    "dots": "dots_saveable",
    "dots_no_batch": "dots_with_no_batch_dims_saveable",
    "everything": "everything_saveable",
}
assert tuple(_JAX_NAMES) == POLICIES, "every policy name of the notation stands for one of JAX's"


def jax_policy(name: str) -> Any:
    """JAX's policy (``jax.checkpoint_policies``) that the name ``name`` of :data:`POLICIES` stands for."""
    return getattr(jax.checkpoint_policies, _JAX_NAMES[name])


CUSTOM = "custom"
"""The name of a policy that is none of :data:`POLICIES` (the user's own function)."""

_LOCK = threading.RLock()  # held through an override's trace; a nested one in that trace may enter


def _remat_primitive() -> Any:
    from jax._src import ad_checkpoint

    return ad_checkpoint.remat_p


def is_checkpoint(eqn: Any) -> bool:
    """Whether ``eqn`` is a checkpointed call (``jax.checkpoint``, ``jax.remat``, flax's
    ``nn.remat``, or the copy JAX derives from one when it differentiates)."""
    return eqn.primitive is _remat_primitive()


def is_jit(eqn: Any) -> bool:
    """Whether ``eqn`` calls a ``jax.jit``-ed function (whose trace JAX caches)."""
    return eqn.primitive.name in ("pjit", "jit")


def policy_name(policy: Any) -> str:
    """The name in :data:`POLICIES` of a checkpoint equation's ``policy`` parameter (None, JAX's
    default, saves nothing), or :data:`CUSTOM`."""
    if policy is None:
        return "nothing"
    for name in POLICIES:
        known = jax_policy(name)
        if policy is known or policy == known:
            return name
    return CUSTOM


def eqn_policy(eqn: Any) -> str:
    """The :func:`policy_name` of a checkpoint equation."""
    return policy_name(eqn.params.get("policy"))


def body_key(jaxpr: Any) -> str:
    """What names a checkpointed function: the source of the body jaxpr JAX traced it into
    (``"layer at /path/model.py:12"``, kept by the copies differentiation derives), or ``"?"``."""
    info = getattr(getattr(jaxpr, "jaxpr", jaxpr), "debug_info", None)
    return str(getattr(info, "func_src_info", None) or "?")


def checkpoint_key(eqn: Any) -> str:
    """The :func:`body_key` of the checkpointed call ``eqn``."""
    return body_key(eqn.params.get("jaxpr"))


@contextlib.contextmanager
def policy_override(policies: Mapping[str, str], cached: bool = False) -> Iterator[None]:
    """Inside, a checkpointed call of a function that ``policies`` maps (by its
    :func:`checkpoint_key`) binds with the policy named there instead of its own.

    Tracing a function inside applies the policy to the program it yields, derivatives taken
    in the trace included. The override is process-wide while it lasts, so traces that use it
    take turns. With ``cached`` (a call lies inside a ``jax.jit`` of its own, which JAX traces
    once and caches), JAX's caches are cleared on entry, so that jit is traced again under the
    override, and on exit, so no later trace reuses what was traced under it.
    """
    if not policies:
        yield
        return
    if cached:
        jax.clear_caches()
    prim = _remat_primitive()
    with _LOCK:
        original = prim.bind

        def bind(*args: Any, **params: Any) -> Any:
            name = policies.get(body_key(params.get("jaxpr"))) if "policy" in params else None
            if name is not None:
                params["policy"] = jax_policy(name)
            return original(*args, **params)

        prim.bind = bind
        try:
            yield
        finally:
            prim.bind = original
            if cached:
                jax.clear_caches()
