"""`at.with_config`: re-emit every loop site of a traced program under a config.

The function is traced once in canonical form; a small interpreter then
replays the jaxpr, binding each scan with the chosen ``unroll`` (the only scan
parameter it writes), expanding ``at.loop`` sites into a Python ``for`` or a
``lax.fori_loop``, and re-emitting a changed while loop through the public
``lax.while_loop`` with cond/body functions that evaluate the original jaxprs
(extra body applications guarded by the loop's predicate). A site's rematerialisation policy is
applied earlier, where JAX reads it: the function is traced again with the chosen policy given
to its checkpointed calls (:func:`under_policies`), so a ``jax.grad`` inside it saves the residuals
that policy says. Sub-jaxprs (scan/while bodies, cond branches, jit callees,
remat and custom-derivative bodies) that hold a changed site are re-traced
through the same interpreter; all others are reused as they are.
"""

from __future__ import annotations

import functools
from collections import OrderedDict
from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
from jax import lax

from autotune._errors import ConfigError, error_text
from autotune.program import _compat
from autotune.program._config import Config, SiteChoice, misfit, scan_unroll
from autotune.program._sites import LoopSite, Program, split_args, trace_program
from autotune.program._xla import jit_options


def _check_choice(site: LoopSite, choice: SiteChoice) -> None:
    wrong = misfit(choice, site.kind, site.length, site.has_ys, bool(site.effects), site.policy is not None)
    if wrong is not None:
        field, why = wrong
        raise ConfigError(f"Config sets site {site.id!r} to {choice}, but its {field} {why}.")


class Plan:
    """Which choice applies at each site of one traced program, validated."""

    def __init__(self, sites: list[LoopSite], config: Config):
        by_id = {s.id: s for s in sites}
        unknown = [k for k in config if k not in by_id]
        if unknown:
            valid = ", ".join(repr(s.id) for s in sites) or "none (the function has no loops)"
            raise ConfigError(
                f"Config names site {unknown[0]!r}, which this function does not have. "
                f"Its sites are: {valid}. List them with at.sites(fn, *args)."
            )
        self.entries: dict[tuple, tuple[LoopSite, SiteChoice]] = {}
        self.dirty: set[tuple] = set()
        for site in sites:
            choice = config.get(site.id, site.default)
            _check_choice(site, choice)
            self.entries[site.path] = (site, choice)
            if self._changes(site, choice):
                for k in range(1, len(site.path) + 1):
                    self.dirty.add(site.path[:k])

    @staticmethod
    def _changes(site: LoopSite, choice: SiteChoice) -> bool:
        if site.kind == "while":
            return choice.unroll > 1
        if site.kind == "loop" and choice.repr in ("for", "fori"):
            return True
        return scan_unroll(choice, site.length) != scan_unroll(site.default, site.length)


def evaluate(jx: Any, args: list[Any], plan: Plan, path: tuple = ()) -> list[Any]:
    """Evaluate ``jx`` on ``args`` (values or tracers), applying ``plan``."""
    inner, consts = _compat.unpack(jx)
    env: dict[Any, Any] = {}

    def read(v):
        return _compat.literal_value(v) if _compat.is_literal(v) else env[v]

    for var, val in zip([*inner.constvars, *inner.invars], [*consts, *args]):
        env[var] = val
    for i, eqn in enumerate(inner.eqns):
        here = path + (i,)
        invals = [read(v) for v in eqn.invars]
        entry = plan.entries.get(here)
        if entry is not None and entry[0].kind == "loop" and entry[1].repr in ("for", "fori"):
            outs = _expand_loop(eqn, entry, invals, plan, here)
        elif entry is not None and entry[0].kind == "while" and here in plan.dirty:
            outs = _expand_while(eqn, entry[1], invals, plan, here)
        else:
            params = eqn.params
            if here in plan.dirty:
                new = {
                    addr: _rewrite_sub(eqn, sub, plan, here + addr)
                    for addr, sub in _compat.sub_jaxprs(params)
                    if here + addr in plan.dirty
                }
                params = _compat.replace_sub_jaxprs(params, new)
                if entry is not None:
                    params = {**params, "unroll": scan_unroll(entry[1], entry[0].length)}
            outs = _compat.bind_like(eqn, params, invals)
        for var, val in zip(eqn.outvars, outs):
            env[var] = val
    return [read(v) for v in inner.outvars]


def _rewrite_sub(eqn: Any, sub: Any, plan: Plan, path: tuple) -> Any:
    """``sub`` (a body of ``eqn``) re-traced through the plan, with the axis names ``eqn``
    binds for it (``shard_map``, ``pmap``) bound, as when JAX traced it."""
    inner, _ = _compat.unpack(sub)
    in_avals = [v.aval for v in inner.invars]
    with _compat.axis_context(eqn):
        return _compat.retrace_like(sub, lambda *a: evaluate(sub, list(a), plan, path), in_avals)


def _expand_loop(eqn, entry, invals, plan: Plan, here: tuple) -> list[Any]:
    site, choice = entry
    ((addr, body),) = list(_compat.sub_jaxprs(eqn.params))[:1]
    body_path = here + addr
    n_consts = len(invals) - site.num_carry - site.num_xs
    consts = invals[:n_consts]
    carry = invals[n_consts : n_consts + site.num_carry]
    xs = invals[n_consts + site.num_carry :]
    reverse = site.reverse
    length = site.length
    if choice.repr == "fori":

        def fori_body(i, c):
            idx = length - 1 - i if reverse else i
            x_i = [lax.dynamic_index_in_dim(x, idx, keepdims=False) for x in xs]
            return tuple(evaluate(body, [*consts, *c, *x_i], plan, body_path)[: site.num_carry])

        return list(lax.fori_loop(0, length, fori_body, tuple(carry), unroll=choice.unroll))
    ys_per_step = []
    for i in reversed(range(length)) if reverse else range(length):
        x_i = [lax.index_in_dim(x, i, keepdims=False) for x in xs]
        outs = evaluate(body, [*consts, *carry, *x_i], plan, body_path)
        carry, ys = outs[: site.num_carry], outs[site.num_carry :]
        ys_per_step.append(ys)
    if reverse:
        ys_per_step.reverse()
    y_avals = [v.aval for v in eqn.outvars[site.num_carry :]]
    if length == 0:
        stacked = [jnp.zeros(a.shape, a.dtype) for a in y_avals]
    else:
        stacked = [jnp.stack(col) for col in zip(*ys_per_step)] if y_avals else []
    return [*carry, *stacked]


def _expand_while(eqn, choice: SiteChoice, invals, plan: Plan, here: tuple) -> list[Any]:
    """Re-emit a while loop whose body runs up to ``choice.unroll`` times per iteration.

    The first application needs no guard (the loop's predicate was just true); each
    extra one is guarded by the predicate on the state before it, so the sequence of
    states, and the result, is the original loop's. A while equation that ``vmap``
    produced inside the program may carry a batched predicate: JAX runs it while any
    lane's predicate holds and keeps the finished lanes unchanged, and so does this.
    """
    (cond_addr, cond), (body_addr, body) = _compat.while_jaxprs(eqn)
    n_cond, n_body = _compat.while_const_counts(eqn)
    cond_consts, body_consts = invals[:n_cond], invals[n_cond : n_cond + n_body]
    init = tuple(invals[n_cond + n_body :])
    batched = bool(_compat.unpack(cond)[0].outvars[0].aval.shape)

    def pred(carry):
        return evaluate(cond, [*cond_consts, *carry], plan, here + cond_addr)[0]

    def apply(carry):
        return tuple(evaluate(body, [*body_consts, *carry], plan, here + body_addr))

    def keep_where(go, new, old):
        return tuple(
            lax.select(lax.broadcast_in_dim(go, jnp.shape(n), tuple(range(jnp.ndim(go)))), n, o)
            for n, o in zip(new, old)
        )

    if batched:

        def step(carry):  # the lanes whose predicate is false keep their state
            return keep_where(pred(carry), apply(carry), carry)

        def cond_fn(carry):
            return jnp.any(pred(carry))
    else:
        step, cond_fn = apply, pred

    def unrolled(carry):
        carry = step(carry)
        for _ in range(choice.unroll - 1):
            if choice.guard == "cond":
                carry = lax.cond(cond_fn(carry), step, lambda c: c, carry)
            elif batched:  # a batched step is its own select guard
                carry = step(carry)
            else:
                carry = keep_where(pred(carry), apply(carry), carry)
        return carry

    with _compat.source_context(eqn):
        return list(lax.while_loop(cond_fn, unrolled if choice.unroll > 1 else step, init))


def policies_of(sites: list[LoopSite], config: Config) -> dict[str, str]:
    """``{checkpoint key: policy name}`` for the checkpointed calls whose site ``config`` gives a
    policy (see :func:`autotune.program._compat.policy_override`)."""
    out: dict[str, str] = {}
    for site in sites:
        choice = config.get(site.id)
        if choice is not None and choice.policy is not None and site.policy is not None:
            out.update(dict.fromkeys(site.remat_keys, choice.policy))
    return out


def under_policies(program: Program, fn: Callable, args: tuple, kwargs: dict | None, config: Config) -> Program:
    """``program`` (``fn`` traced on the arguments) when ``config`` chooses no policy for its
    checkpointed loop bodies, else ``fn`` traced again with those policies in force: the same
    sites, each with the policy it now has. Replay the program this returns under ``config``."""
    policies = policies_of(program.sites, config)
    if not policies:
        return program
    cached = any(s.remat_in_jit for s in program.sites if s.policy is not None)
    with _compat.policy_override(policies, cached=cached):
        return trace_program(fn, args, kwargs)


def _signature_key(leaves, treedef, dynamic) -> Any:
    try:
        statics = tuple((i, leaves[i]) for i in range(len(leaves)) if i not in set(dynamic))
        hash(statics)
    except TypeError:
        return None
    avals = tuple(
        _compat.aval_of(leaves[i]) if not isinstance(leaves[i], jax.ShapeDtypeStruct) else leaves[i] for i in dynamic
    )
    try:
        key = (treedef, statics, tuple(str(a) + str(getattr(a, "weak_type", "")) for a in avals))
        hash(key)
        return key
    except TypeError:
        return None


def with_config(fn: Callable, config: Config | dict | None) -> Callable:
    """Return ``fn`` with every loop site re-emitted as ``config`` says.

    The result has ``fn``'s signature, takes and returns the same pytrees, and
    composes with ``jax.jit`` (including ``static_argnums``/``donate_argnums``),
    ``jax.grad`` and ``jax.vmap``. Sites the config does not name keep their
    default. Invalid configs raise :class:`ConfigError` on the first call.

    Arguments:
        fn: the function to re-emit.
        config: an :class:`at.Config` or a dict ``{site_id: {"repr": ..., "unroll": ...}}``;
            a while site takes ``{"repr": "while", "unroll": k, "guard": "select" | "cond"}``;
            a site whose body is checkpointed also takes ``"policy"`` (``"dots"``...).

    Returns:
        The re-emitted function.

    Example::

        >>> import jax, jax.numpy as jnp, autotune as at
        >>> def f(x):
        ...     return jax.lax.scan(lambda c, _: (c * 0.5 + 1.0, None), x, length=8)[0]
        >>> (site,) = at.sites(f, jnp.zeros(3))
        >>> g = jax.jit(at.with_config(f, {site.id: {"repr": "scan", "unroll": 4}}))
        >>> bool(jnp.allclose(g(jnp.zeros(3)), f(jnp.zeros(3))))
        True
    """
    config = Config.from_dict(config)
    programs: OrderedDict[Any, tuple[Program, Plan]] = OrderedDict()

    @functools.wraps(fn)
    def configured(*args, **kwargs):
        leaves, treedef, dynamic = split_args(args, kwargs)
        key = _signature_key(leaves, treedef, dynamic)
        if key is not None and key in programs:
            program, plan = programs[key]
        else:
            program = under_policies(trace_program(fn, args, kwargs), fn, args, kwargs, config)
            plan = Plan(program.sites, config)
            if key is not None and not any(_compat.is_tracer(c) for c in _compat.unpack(program.jaxpr)[1]):
                programs[key] = (program, plan)
                while len(programs) > 32:
                    programs.popitem(last=False)
        out = evaluate(program.jaxpr, [leaves[i] for i in dynamic], plan)
        return jax.tree_util.tree_unflatten(program.out_tree, out)

    configured.config = config  # type: ignore[attr-defined]
    return configured


def rewrite_error(
    fn: Callable, args: tuple, kwargs: dict | None, jit_kwargs: dict | None, config: Config
) -> str | None:
    """Trace ``jax.jit(with_config(fn, config), **jit_kwargs)`` on the arguments, without
    lowering: None when it traces, else the error as ``"Type: message"``."""
    jitted = jax.jit(with_config(fn, config), **jit_options(config.xla, jit_kwargs))
    try:
        stage = getattr(jitted, "trace", None) or jitted.lower  # jax without .trace lowers too
        stage(*args, **dict(kwargs or {}))
    except Exception as exc:  # what makes the rewrite fail is the answer, whatever it is
        return error_text(exc)
    return None
