"""Loops under axis-binding transforms (``shard_map``, ``pmap``, ``vmap(axis_name=...)``) are
rewritten in their context: same values and gradients as the default, for every choice.

A body that uses a collective (``psum`` over ``"data"``) must be re-traced with that axis
name bound, under the manual mesh, with its inputs typed as varying over it; traced outside
(a plain ``make_jaxpr``) it raised ``NameError: unbound axis name`` or a scan carry type
mismatch. The bodies here call a collective outside their loops too, so every rewrite
re-traces a collective.

These tests need 8 devices: run alone, the module starts itself again in a process of its
own with ``XLA_FLAGS=--xla_force_host_platform_device_count=8`` (JAX reads it once, at start).
"""

import os
import subprocess
import sys

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from _repo import ROOT, repo_env
from jax import lax
from jax.sharding import Mesh
from jax.sharding import PartitionSpec as P

import autotune as at
from autotune.program._space import Space

DEVICES = 8
FLAG = f"--xla_force_host_platform_device_count={DEVICES}"
here = pytest.mark.skipif(
    jax.device_count() < DEVICES,
    reason=f"needs {DEVICES} devices: run by test_on_eight_host_devices in its own process",
)


@pytest.mark.slow
@pytest.mark.skipif(jax.device_count() >= DEVICES, reason="this process has the devices: the tests run here")
def test_on_eight_host_devices():
    env = repo_env(XLA_FLAGS=f"{os.environ.get('XLA_FLAGS', '')} {FLAG}".strip())
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-x", os.path.relpath(__file__, ROOT)],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
    )
    tail = (proc.stdout + proc.stderr)[-6000:]
    assert proc.returncode == 0, tail
    assert " passed" in proc.stdout, tail


# --- programs -----------------------------------------------------------------------------

T, COLS = 6, 2 * DEVICES


def mesh1() -> Mesh:
    return Mesh(np.array(jax.devices()[:DEVICES]), ("data",))


def local_loss(w, xs):
    """One device's columns: a recurrence with a nested fori_loop and an at.loop, collectives
    inside and outside the loops."""

    def step(h, x):
        h = jnp.tanh(h * w + x + 0.1 * lax.pmean(h, "data"))
        h = lax.fori_loop(0, 3, lambda i, g: jnp.sin(g) + 0.01 * lax.psum(g, "data"), h)
        return h, jnp.sum(h)

    h, ys = lax.scan(step, jnp.zeros_like(xs[0]), xs)
    h = at.loop(lambda c, _: (jnp.cos(c) * 0.9 + 0.05 * lax.psum(c, "data"), None), h, length=4, name="refine")[0]
    return lax.psum(jnp.sum(h**2) + 0.1 * jnp.sum(ys), "data")


def sharded_loss(check_vma=True, spelling="jax"):
    specs = dict(in_specs=(P(), P(None, "data")), out_specs=P())
    if spelling == "jax":
        return jax.shard_map(local_loss, mesh=mesh1(), check_vma=check_vma, **specs)
    from jax.experimental.shard_map import shard_map  # the older spelling, where this jax has it

    return shard_map(local_loss, mesh=mesh1(), **specs)


def inputs():
    rng = np.random.default_rng(0)
    return jnp.float32(0.7), jnp.asarray(rng.standard_normal((T, COLS)).astype(np.float32) * 0.5)


def choices(site):
    """Every representation a site offers, with an unroll that changes it."""
    if site.kind == "while":
        return [{"repr": "while", "unroll": 2, "guard": "select"}, {"repr": "while", "unroll": 3, "guard": "cond"}]
    out = [{"repr": "scan", "unroll": 2}, {"repr": "for"}]
    if site.kind == "loop" and not site.has_ys:
        out.append({"repr": "fori", "unroll": 2})
    return out


def assert_close(got, want):
    for g, w in zip(jax.tree_util.tree_leaves(got), jax.tree_util.tree_leaves(want)):
        np.testing.assert_allclose(np.asarray(g), np.asarray(w), rtol=2e-5, atol=2e-6)


def check_every_choice(fn, *args, each: bool = True):
    """Each site alone at each of its choices (``each=False``: at one, in turn), then every
    site at once: the values of ``fn``."""
    want = jax.jit(fn)(*args)
    sites = at.sites(fn, *args)
    assert sites
    for i, site in enumerate(sites):
        for choice in choices(site) if each else [choices(site)[i % len(choices(site))]]:
            assert_close(jax.jit(at.with_config(fn, {site.id: choice}))(*args), want)
    every = {s.id: choices(s)[0] for s in sites}
    assert_close(jax.jit(at.with_config(fn, every))(*args), want)
    assert_close(at.with_config(fn, every)(*args), want)  # eager too
    return sites


# --- shard_map ----------------------------------------------------------------------------------


@here
def test_the_issue_example_scan_x2_in_a_shard_map_body():
    f = sharded_loss()
    args = inputs()
    site = next(s for s in at.sites(f, *args) if s.kind == "scan" and s.depth == 0)
    got = jax.jit(at.with_config(f, {site.id: {"repr": "scan", "unroll": 2}}))(*args)
    assert_close(got, jax.jit(f)(*args))


@here
@pytest.mark.parametrize("check_vma", [True, False])
def test_shard_map_values_for_every_choice(check_vma):
    sites = check_every_choice(sharded_loss(check_vma), *inputs())
    assert {s.kind for s in sites} == {"scan", "loop"} and max(s.depth for s in sites) == 1


@here
def test_shard_map_gradients_equal_the_default():
    f, args = sharded_loss(), inputs()
    # Under jit: op by op, a gradient through the shard_map takes 12 s on 2 cores (check_every_choice
    # runs the rewritten program eagerly once).
    want = jax.jit(jax.grad(f, argnums=(0, 1)))(*args)
    for i, site in enumerate(at.sites(f, *args)):  # each site at one choice, the choices in turn
        choice = choices(site)[i % len(choices(site))]
        assert_close(jax.jit(jax.grad(at.with_config(f, {site.id: choice}), argnums=(0, 1)))(*args), want)
    # the gradient program's own sites, the backward loops JAX derived inside the shard_map among them
    sites = check_every_choice(jax.grad(f, argnums=(0, 1)), *args, each=False)
    assert any(s.derived for s in sites)


@here
@pytest.mark.filterwarnings("ignore::DeprecationWarning")
def test_experimental_shard_map_spelling():
    pytest.importorskip("jax.experimental.shard_map")
    check_every_choice(sharded_loss(spelling="experimental"), *inputs())


@here
def test_two_axis_mesh_and_a_partly_manual_body():
    mesh = Mesh(np.array(jax.devices()[:DEVICES]).reshape(2, 4), ("a", "b"))

    def local(x):
        def step(c, _):
            return jnp.sin(c) + 0.1 * lax.psum(c, "a") + lax.pmean(c, ("a", "b")), None

        return lax.psum(lax.scan(step, x, length=5)[0], ("a", "b"))

    both = jax.shard_map(local, mesh=mesh, in_specs=P("a", "b"), out_specs=P())
    check_every_choice(both, jnp.linspace(0.0, 1.0, 32).reshape(4, 8))

    def local_a(x):  # only "a" is manual; "b" stays with the compiler
        step = lambda c, _: (jnp.sin(c) + 0.1 * lax.psum(c, "a"), None)  # noqa: E731
        return lax.psum(lax.scan(step, x, length=5)[0], "a")

    part = jax.shard_map(local_a, mesh=mesh, in_specs=P("a"), out_specs=P(), axis_names={"a"})
    check_every_choice(part, jnp.linspace(0.0, 1.0, 32).reshape(8, 4))


@here
def test_while_loop_with_collectives_in_a_shard_map_body():
    def local(x):
        def cond(s):
            return lax.psum(s[0], "data") < 5 * DEVICES

        def body(s):
            return s[0] + 1, jnp.cos(s[1]) + 0.01 * lax.psum(s[1], "data")

        return lax.psum(lax.while_loop(cond, body, (0, x))[1], "data")

    f = jax.shard_map(local, mesh=mesh1(), in_specs=P("data"), out_specs=P())
    (site,) = check_every_choice(f, jnp.linspace(0.0, 1.0, COLS))
    # a collective is no side effect: the select guard stays on offer
    assert not site.effects and "select" in Space([site]).entries[0].guards


@here
def test_jit_inside_and_outside_the_shard_map():
    inner = jax.jit(sharded_loss())
    check_every_choice(lambda w, xs: inner(w, xs) * 2.0, *inputs())


# --- pmap and vmap(axis_name) -------------------------------------------------------------------------


def per_device(x):
    def step(c, _):
        return jnp.sin(c) * 0.9 + 0.01 * lax.psum(c, "i"), jnp.sum(c)

    c, ys = lax.scan(step, x, length=6)
    return c + lax.pmean(jnp.sum(ys), "i")


@here
def test_pmap_body():
    f = jax.pmap(per_device, axis_name="i")
    x = jnp.linspace(0.0, 1.0, DEVICES * 3).reshape(DEVICES, 3)
    check_every_choice(f, x)
    check_every_choice(jax.grad(lambda x: jnp.sum(f(x) ** 2)), x, each=False)


@here
def test_vmap_with_an_axis_name():
    f = jax.vmap(per_device, axis_name="i")
    x = jnp.linspace(0.0, 1.0, DEVICES * 3).reshape(DEVICES, 3)
    check_every_choice(f, x)
    check_every_choice(jax.grad(lambda x: jnp.sum(f(x) ** 2)), x, each=False)
