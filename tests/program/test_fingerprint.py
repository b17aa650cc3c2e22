"""The program fingerprint hashes the computation, never its printout.

A real pseudo-terminal (where JAX colours printed jaxprs) and a pipe give the same
fingerprint, and an entry stored by one is a cache hit for the other. In-process
tests check that the fingerprint follows the computation: a changed constant, shape,
dtype, operation, trip count or loop structure changes it; unroll factors, names,
source paths and lines of non-loop code do not.
"""

import json
import os
import subprocess
import sys
import textwrap

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from _cli import on_terminal
from _repo import repo_env
from jax import lax

import autotune as at
from autotune.program._fingerprint import canonical_hash
from autotune.program._sites import trace_program

APP = textwrap.dedent("""
    import jax.numpy as jnp
    from jax import lax
    import autotune as at

    W = jnp.linspace(0.5, 1.0, 3)


    @at.autotuned(cache=CACHE)
    def step(x, xs):
        c, ys = lax.scan(lambda c, x: (jnp.sin(c) * W + x, c.sum()), x, xs)
        c = at.loop(lambda d, _: (jnp.tanh(d) + 0.1, None), c, length=6, name="refine")[0]
        c = lax.fori_loop(0, 4, lambda i, d: d * 1.01 + i, c)
        return c, ys


    X, XS = jnp.ones(3), jnp.ones((8, 3))
""")

RUN = textwrap.dedent("""
    import json, os, sys
    sys.path.insert(0, os.getcwd())
    import jax
    import autotune as at
    import app

    action = sys.argv[1]
    lookup = app.step.config_for(app.X, app.XS)
    program = at.program._sites.trace_program(app.step.autotune.fun, (app.X, app.XS))
    out = {"tty": sys.stdout.isatty(), "coloured": "\\x1b[" in str(program.jaxpr),
           "fingerprint": lookup.fingerprint, "signature": lookup.signature, "source": lookup.source,
           "config": lookup.config.to_dict()}
    if action == "store":
        sites = {s.id: {"kind": s.kind, "length": s.length, "has_ys": s.has_ys} for s in program.sites}
        at.Cache(app.CACHE).put(at.CacheEntry(
            function_key=app.step.key, fingerprint=lookup.fingerprint, signature=lookup.signature,
            device=at.program._keys.device_info(), config={"refine": {"repr": "for"}}, sites=sites,
            measurements={"run_s": 1e-6}, cost=1.0,
            objective={"expected_calls": 1000, "compile_weight": 1.0, "runtime_weight": 1.0}))
        assert lookup.device_key == at.Cache(app.CACHE).entries()[0].device_key
    print("RESULT " + json.dumps(out), flush=True)
""")


def write_app(d, cache):
    d.mkdir(exist_ok=True)
    (d / "app.py").write_text(f"CACHE = {str(cache)!r}\n" + APP)
    (d / "run.py").write_text(RUN)


def env():
    return repo_env(TERM=os.environ.get("TERM") or "xterm-256color")


def parse(text):
    lines = [ln for ln in text.replace("\r", "").splitlines() if ln.startswith("RESULT ")]
    assert lines, text[-3000:]
    return json.loads(lines[-1][len("RESULT ") :])


def run_in_pipe(d, action):
    p = subprocess.run(
        [sys.executable, "run.py", action], cwd=d, env=env(), capture_output=True, text=True, timeout=240
    )
    assert p.returncode == 0, p.stderr[-3000:]
    return parse(p.stdout)


def run_in_pty(d, action):
    """Run with stdout and stderr on a real pseudo-terminal, as at an interactive shell."""
    rc, text = on_terminal([sys.executable, "run.py", action], cwd=d, env=env(), timeout=240)
    assert rc == 0, text[-3000:]
    return parse(text)


@pytest.mark.slow
def test_terminal_and_pipe_share_fingerprint_and_cache_entries(tmp_path):
    a, b = tmp_path / "tty_stores", tmp_path / "pipe_stores"
    write_app(a, tmp_path / "a.db")
    write_app(b, tmp_path / "b.db")

    stored_at_tty = run_in_pty(a, "store")
    read_in_pipe = run_in_pipe(a, "lookup")
    stored_in_pipe = run_in_pipe(b, "store")
    read_at_tty = run_in_pty(b, "lookup")

    # The setup really reproduces the problem: JAX colours the printout at a terminal only.
    assert stored_at_tty["tty"] and stored_at_tty["coloured"]
    assert not read_in_pipe["tty"] and not read_in_pipe["coloured"]
    assert stored_at_tty["fingerprint"] == read_in_pipe["fingerprint"] == stored_in_pipe["fingerprint"]
    assert stored_at_tty["signature"] == read_in_pipe["signature"]
    assert stored_at_tty["source"] == "default" and stored_in_pipe["source"] == "default"
    assert read_in_pipe["source"] == "cache" and read_in_pipe["config"] == {"refine": {"repr": "for", "unroll": 1}}
    assert read_at_tty["source"] == "cache" and read_at_tty["config"] == {"refine": {"repr": "for", "unroll": 1}}


# --- in-process: what changes the fingerprint and what does not ----------------------------------


def fp(fn, *args):
    return trace_program(fn, args).fingerprint


def scan_fn(const=1.0, length=4, op=jnp.sin, unroll=1, shape_dtype=None):
    def f(x):
        return lax.scan(lambda c, _: (op(c) + const, None), x, None, length=length, unroll=unroll)[0]

    return f


X = jnp.ones(3, jnp.float32)


def test_same_program_same_fingerprint():
    assert fp(scan_fn(), X) == fp(scan_fn(), X)
    assert len(fp(scan_fn(), X)) == 32


def test_computation_changes_change_it():
    base = fp(scan_fn(), X)
    assert fp(scan_fn(const=2.0), X) != base  # a literal constant
    assert fp(scan_fn(op=jnp.cos), X) != base  # an operation
    assert fp(scan_fn(length=5), X) != base  # a trip count
    assert fp(scan_fn(), jnp.ones(4, jnp.float32)) != base  # a shape
    assert fp(scan_fn(), jnp.ones(3, jnp.bfloat16)) != base  # a dtype


def test_array_constants_are_hashed_by_value():
    def with_const(values):
        w = np.asarray(values, np.float32)
        return lambda x: lax.scan(lambda c, _: (c * w, None), x, None, length=3)[0]

    a = fp(with_const([1.0, 2.0, 3.0]), X)
    assert fp(with_const([1.0, 2.0, 3.0]), X) == a
    assert fp(with_const([1.0, 2.0, 3.5]), X) != a
    big = np.arange(10_000, dtype=np.float32)
    big2 = big.copy()
    big2[-1] += 1
    assert canonical_hash(jax.make_jaxpr(lambda x: x + big)(big)) != canonical_hash(
        jax.make_jaxpr(lambda x: x + big2)(big)
    )


def test_loop_structure_changes_change_it():
    def two_scans(x):
        x = lax.scan(lambda c, _: (jnp.sin(c), None), x, None, length=2)[0]
        return lax.scan(lambda c, _: (jnp.sin(c), None), x, None, length=2)[0]

    def nested(x):
        return lax.scan(
            lambda c, _: (lax.scan(lambda d, _: (jnp.sin(d), None), c, None, length=2)[0], None), x, None, length=2
        )[0]

    assert fp(two_scans, X) != fp(nested, X)


def test_unroll_factors_do_not_change_it():
    base = fp(scan_fn(), X)
    for unroll in (2, 4, True):
        assert fp(scan_fn(unroll=unroll), X) == base

    def loop(unroll, rep="scan"):
        return lambda x: at.loop(lambda c, _: (jnp.tanh(c), None), x, length=6, name="l", unroll=unroll, repr=rep)[0]

    assert fp(loop(1), X) == fp(loop(3), X) == fp(loop(1, "for"), X)
    fori = [lambda x, u=u: lax.fori_loop(0, 6, lambda i, c: c * 1.5, x, unroll=u) for u in (1, 2, 3)]
    assert len({canonical_hash(jax.make_jaxpr(f)(X)) for f in fori}) == 1


def test_while_loops_are_fingerprinted_by_their_cond_and_body():
    def solver(tol, step=0.5):
        return lambda x: lax.while_loop(lambda c: jnp.abs(c - 2.0).max() > tol, lambda c: c + step * (2.0 - c), x)

    base = canonical_hash(jax.make_jaxpr(solver(1e-3))(X))
    assert canonical_hash(jax.make_jaxpr(solver(1e-3))(X)) == base
    assert canonical_hash(jax.make_jaxpr(solver(1e-4))(X)) != base
    assert canonical_hash(jax.make_jaxpr(solver(1e-3, 0.25))(X)) != base


def test_names_do_not_change_it():
    def named(name):
        return lambda x: jax.named_call(lambda v: jnp.sin(v) * 2.0, name=name)(x)

    assert fp(named("a"), X) == fp(named("b"), X)

    def scoped(name):
        def f(x):
            with jax.named_scope(name):
                return jnp.sin(x)

        return f

    assert fp(scoped("first"), X) == fp(scoped("second"), X)


SOURCE = """
import jax.numpy as jnp
from jax import lax


def fn(x):
    x = lax.scan(lambda c, _: (jnp.sin(c), None), x, None, length=3)[0]
PADDING    y = jnp.cos(x) * 2.0
    return y + 1.0
"""


def compiled_fn(path, padding=""):
    code = compile(SOURCE.replace("PADDING", padding), str(path), "exec")
    ns = {}
    exec(code, ns)
    return ns["fn"]


def test_source_paths_and_lines_of_non_loop_code_do_not_change_it(tmp_path):
    """The fingerprint holds no path or line; only site ids (file name and line of each
    loop) enter it, so moving a loop changes it and moving other code does not."""
    here = fp(compiled_fn(tmp_path / "a" / "model.py"), X)
    assert fp(compiled_fn(tmp_path / "b" / "model.py"), X) == here  # another directory
    assert fp(compiled_fn(tmp_path / "a" / "model.py", "\n\n\n"), X) == here  # non-loop code moved
    assert fp(compiled_fn(tmp_path / "a" / "other.py"), X) != here  # the loop's id changed


def test_callbacks_are_described_without_addresses():
    def cb(name):
        def host(v):
            return np.asarray(v) * 2

        host.__qualname__ = name
        return lambda x: jax.pure_callback(host, jax.ShapeDtypeStruct(x.shape, x.dtype), x)

    assert canonical_hash(jax.make_jaxpr(cb("host"))(X)) == canonical_hash(jax.make_jaxpr(cb("host"))(X))
    assert canonical_hash(jax.make_jaxpr(cb("host"))(X)) != canonical_hash(jax.make_jaxpr(cb("other"))(X))


def test_prng_key_constants_are_hashed_by_value():
    def sample(seed):
        key = jax.random.key(seed)
        return lambda x: x + jax.random.normal(key, x.shape)

    assert fp(sample(0), X) == fp(sample(0), X)
    assert fp(sample(0), X) != fp(sample(1), X)


SCRIPT = textwrap.dedent("""
    import jax, jax.numpy as jnp
    from jax import lax


    @jax.custom_vjp
    def clip_grad(x):
        return x


    clip_grad.defvjp(lambda x: (x, None), lambda _, g: (jnp.clip(g, -1.0, 1.0),))


    def fn(x):
        return lax.scan(lambda c, _: (clip_grad(jnp.sin(c)), None), x, None, length=3)[0]


    if __name__ == "__main__":
        import autotune.program._sites as S
        print("RESULT " + S.trace_program(fn, (jnp.ones(3),)).fingerprint)
""")


@pytest.mark.slow
def test_a_script_run_directly_and_imported_has_one_fingerprint(tmp_path):
    """Run as ``python app.py`` its functions live in ``__main__``; imported, in ``app``."""
    (tmp_path / "app.py").write_text(SCRIPT)
    direct = subprocess.run(
        [sys.executable, "app.py"], cwd=tmp_path, env=env(), capture_output=True, text=True, timeout=240
    )
    imported = subprocess.run(
        [
            sys.executable,
            "-c",
            "import jax.numpy as jnp, app, autotune.program._sites as S; "
            "print('RESULT ' + S.trace_program(app.fn, (jnp.ones(3),)).fingerprint)",
        ],
        cwd=tmp_path,
        env=env(),
        capture_output=True,
        text=True,
        timeout=240,
    )
    assert direct.returncode == 0 and imported.returncode == 0, direct.stderr + imported.stderr
    assert direct.stdout.split("RESULT ")[-1].strip() == imported.stdout.split("RESULT ")[-1].strip()


def swapped_carries(order):
    """One scan, its two carries written in either order; the same computation."""

    def f(a, b):
        def body(c, _):
            x, y = c if order else c[::-1]
            x, y = jnp.sin(x) * 0.5 + y, y * 2.0 - x
            return ((x, y) if order else (y, x)), None

        init = (a, b) if order else (b, a)
        out = lax.scan(body, init, None, length=4)[0]  # one line: one site id for both orders
        return out if order else out[::-1]

    return f


def test_the_order_a_program_is_written_in_does_not_change_it():
    a, b = jnp.ones(3), jnp.full(3, 2.0)
    assert fp(swapped_carries(True), a, b) == fp(swapped_carries(False), a, b)

    def sin_first(x):
        s = jnp.sin(x)
        c = jnp.cos(x)
        return s * 2.0 + c

    def cos_first(x):
        c = jnp.cos(x)
        s = jnp.sin(x)
        return s * 2.0 + c

    assert canonical_hash(jax.make_jaxpr(sin_first)(X)) == canonical_hash(jax.make_jaxpr(cos_first)(X))


def test_which_result_feeds_which_carry_changes_it():
    def feed(straight):
        def body(c, _):
            x, y = c
            new = (jnp.sin(x), jnp.cos(y))
            return (new if straight else new[::-1]), None

        return lambda a, b: lax.scan(body, (a, b), None, length=4)[0]

    a, b = jnp.ones(3), jnp.full(3, 2.0)
    assert fp(feed(True), a, b) != fp(feed(False), a, b)
    # Operand order of an ordinary operation still counts: a - b is not b - a.
    assert canonical_hash(jax.make_jaxpr(lambda a, b: a - b)(a, b)) != canonical_hash(
        jax.make_jaxpr(lambda a, b: b - a)(a, b)
    )


SET_ORDER = textwrap.dedent("""
    import jax.numpy as jnp
    from jax import lax
    import autotune.program._sites as S

    NAMES = {"loc", "scale", "rate", "shift", "gain"}  # iterated in PYTHONHASHSEED's order


    def fn(x):
        fields = list(NAMES)
        init = {n: x * (len(n) + 1.0) for n in fields}
        carry = tuple(init[n] for n in fields)  # the carry's order follows the set's

        def body(c, _):
            d = dict(zip(fields, c))
            d = {"loc": d["loc"] + d["scale"], "scale": d["scale"] * 0.9, "rate": jnp.sin(d["rate"]),
                 "shift": d["shift"] - d["gain"], "gain": d["gain"] * d["loc"]}
            return tuple(d[n] for n in fields), None
        out = dict(zip(fields, lax.scan(body, carry, None, length=3)[0]))
        return [out[n] for n in sorted(out)]


    print("ORDER " + ",".join(NAMES))
    print("RESULT " + S.trace_program(fn, (jnp.ones(3),)).fingerprint)
""")


@pytest.mark.slow
def test_a_program_traced_in_set_order_has_one_fingerprint_across_hash_seeds(tmp_path):
    """Libraries that iterate a ``set`` (numpyro's distribution fields) trace their operands
    and carries in an order drawn per process: the fingerprint must not depend on it."""
    (tmp_path / "app.py").write_text(SET_ORDER)
    orders, prints = set(), set()
    for seed in range(1, 7):
        p = subprocess.run(
            [sys.executable, "app.py"],
            cwd=tmp_path,
            env=dict(env(), PYTHONHASHSEED=str(seed)),
            capture_output=True,
            text=True,
            timeout=240,
        )
        assert p.returncode == 0, p.stderr[-3000:]
        orders.add(p.stdout.split("ORDER ")[1].split()[0])
        prints.add(p.stdout.split("RESULT ")[-1].strip())
    assert len(orders) > 1  # the seeds did draw different orders
    assert len(prints) == 1, prints


# --------------------------------------------------------- jaxprs held in a primitive's params


def bare_jaxpr_primitive():
    """A primitive like lineax's ``linear_solve``: its params hold a bare ``Jaxpr`` whose
    constvars are bound by the primitive's first operands, not held beside it."""
    from jax.extend import core as jex
    from jax.interpreters import mlir

    prim = jex.Primitive("autotune_test_apply_bare_jaxpr")

    def impl(c, d, x, *, jaxpr):
        return jnp.sin(x) * c + d

    prim.def_impl(impl)
    prim.def_abstract_eval(lambda c, d, x, *, jaxpr: x)  # the result's type is x's
    mlir.register_lowering(prim, mlir.lower_fun(impl, multiple_results=False))
    return prim


PRIM = bare_jaxpr_primitive()


def with_bare_jaxpr(op=jnp.sin, shape=3):
    c, d = jnp.arange(float(shape)), jnp.full(shape, 2.0)
    closed = jax.make_jaxpr(lambda x: op(x) * c + d)(jnp.zeros(shape))
    bare = getattr(closed, "jaxpr", closed)  # jax <= 0.11: constvars without their values
    return lambda x: PRIM.bind(c, d, x * 2.0, jaxpr=bare) + 1.0


def test_a_bare_jaxpr_with_constvars_in_params_is_hashed_with_its_constants_bound():
    x = jnp.ones(3)
    base = fp(with_bare_jaxpr(), x)
    assert base == fp(with_bare_jaxpr(), x)
    assert fp(with_bare_jaxpr(op=jnp.cos), x) != base  # the held program counts
    assert fp(with_bare_jaxpr(shape=4), jnp.ones(4)) != fp(with_bare_jaxpr(shape=4, op=jnp.cos), jnp.ones(4))


def test_a_decorated_function_holding_a_bare_jaxpr_runs_as_under_jit(tmp_path, recwarn):
    fn = with_bare_jaxpr()
    tuned = at.autotuned(fn, cache=str(tmp_path / "c.db"), key="tests:bare")
    np.testing.assert_array_equal(tuned(jnp.ones(3)), jax.jit(fn)(jnp.ones(3)))
    assert tuned.autotune.last_lookup.source == "default"
    assert not [w for w in recwarn if "autotune" in str(w.message)]
