"""at.sites: every loop of the traced program, at any depth, with stable ids.

Loops under test are written on lines that end with a ``# <tag>`` comment; the
expected ``source`` and id of a site are computed from where that tag is in this
file, so the tests keep working when lines move.
"""

import functools
import importlib.util
import json
import os
import re
import subprocess
import sys

import jax
import jax.numpy as jnp
import pytest
from _repo import repo_env
from jax import lax

import autotune as at
from autotune.program import _sites

THIS = os.path.realpath(__file__)
BASE = os.path.basename(THIS)


def line_of(tag: str) -> int:
    """The line of this file that ends with the comment ``# <tag>``."""
    with open(THIS) as f:
        hits = [i for i, line in enumerate(f, 1) if line.rstrip().endswith(f"# {tag}")]
    assert len(hits) == 1, f"tag {tag!r} must mark exactly one line, found {hits}"
    return hits[0]


def local(tag: str, kind: str = "scan") -> str:
    return f"{kind}@{BASE}:{line_of(tag)}"


def check_source(site, tag):
    assert site.source is not None, site
    file, line = site.source.rsplit(":", 1)
    assert os.path.realpath(file) == THIS, site.source
    assert int(line) == line_of(tag), (site.source, tag)


def by_id(sites):
    ids = [s.id for s in sites]
    assert len(set(ids)) == len(ids), f"duplicate ids: {ids}"
    return {s.id: s for s in sites}


def sin_body(c, x):
    return jnp.sin(c) + x, c


X = jnp.linspace(0.0, 1.0, 5, dtype=jnp.float32)


# --- nested scans -----------------------------------------------------------------


def nested(x):
    def outer_body(c, _):
        c2, ys = lax.scan(sin_body, c, x)  # T:nested-inner
        return c2, ys.sum()

    return lax.scan(outer_body, x[0], None, length=3)  # T:nested-outer


def test_nested_scans_ids_depth_parent_source():
    sites = at.sites(nested, X)
    outer_id = local("T:nested-outer")
    inner_id = f"{outer_id}/{local('T:nested-inner')}"
    assert [s.id for s in sites] == [outer_id, inner_id]  # outermost first
    outer, inner = sites
    assert (outer.kind, outer.length, outer.depth, outer.parent, outer.name) == ("scan", 3, 0, None, None)
    assert (inner.kind, inner.length, inner.depth, inner.parent, inner.name) == ("scan", 5, 1, outer_id, None)
    check_source(outer, "T:nested-outer")
    check_source(inner, "T:nested-inner")


def three_deep(x):
    def mid(c, _):
        def inner(d, _):
            return lax.scan(lambda e, _: (e * 0.5, None), d, None, length=2)[0], None  # T:deep-3

        return lax.scan(inner, c, None, length=3)[0], None  # T:deep-2

    return lax.scan(mid, x, None, length=4)[0]  # T:deep-1


def test_three_levels_of_nesting():
    s1, s2, s3 = at.sites(three_deep, X)
    assert [s.depth for s in (s1, s2, s3)] == [0, 1, 2]
    assert [s.length for s in (s1, s2, s3)] == [4, 3, 2]
    assert s1.parent is None and s2.parent == s1.id and s3.parent == s2.id
    assert s3.id == f"{s2.id}/{local('T:deep-3')}"
    assert s2.id == f"{s1.id}/{local('T:deep-2')}"


# --- containers: jit callee, cond, switch, while, remat, custom_jvp/vjp ----------


@jax.jit
def jitted_callee(x):
    return lax.scan(sin_body, x[0], x)[0]  # T:jit-callee


def calls_jitted(x):
    return jitted_callee(x) * 2.0


def scan_around_jitted(x):
    return lax.scan(lambda c, _: (c + jitted_callee(x), None), x[0], None, length=2)[0]  # T:around-jit


def test_scan_inside_jit_decorated_callee():
    (site,) = at.sites(calls_jitted, X)
    assert site.id == local("T:jit-callee")
    assert (site.kind, site.length, site.depth, site.parent) == ("scan", 5, 0, None)
    check_source(site, "T:jit-callee")


def test_jit_callee_inside_a_scan_body_is_nested_under_it():
    outer, inner = at.sites(scan_around_jitted, X)
    assert outer.id == local("T:around-jit")
    assert inner.id == f"{outer.id}/{local('T:jit-callee')}"
    assert (inner.depth, inner.parent, inner.length) == (1, outer.id, 5)


def in_cond(x, p):
    return lax.cond(p, lambda v: lax.scan(sin_body, v[0], v)[0], lambda v: v[0], x)  # T:cond


def in_switch(x, i):
    return lax.switch(
        i,
        [
            lambda v: v[0],
            lambda v: lax.scan(sin_body, v[0], v[:4])[0],  # T:switch-scan
            lambda v: lax.fori_loop(0, 6, lambda j, c: c * 1.5, v[0]),  # T:switch-fori
        ],
        x,
    )


def test_scan_in_cond_branch():
    (site,) = at.sites(in_cond, X, True)
    assert site.id == local("T:cond")
    assert (site.kind, site.length, site.depth, site.parent) == ("scan", 5, 0, None)
    check_source(site, "T:cond")


def test_loops_in_every_switch_branch():
    sites = by_id(at.sites(in_switch, X, 1))
    scan_id, fori_id = local("T:switch-scan"), local("T:switch-fori", "fori")
    assert set(sites) == {scan_id, fori_id}
    assert sites[scan_id].length == 4 and sites[fori_id].length == 6
    assert sites[fori_id].kind == "scan"
    check_source(sites[scan_id], "T:switch-scan")
    check_source(sites[fori_id], "T:switch-fori")


def in_while(x):
    def body(c):
        i, v = c
        return i + 1, lax.scan(sin_body, v, x)[0]  # T:while-body

    return lax.while_loop(lambda c: c[0] < 3, body, (0, x[0]))[1]  # T:while


def dynamic_loops(x, n):
    a = lax.fori_loop(0, n, lambda i, c: c * 1.5, x)  # T:dyn-fori
    return lax.while_loop(lambda c: c.sum() < 10.0, lambda c: c + 1.0, a)  # T:dyn-while


def test_while_loop_is_a_site_and_a_scan_in_its_body_is_nested_under_it():
    loop, site = at.sites(in_while, X)
    assert loop.id == local("T:while", "while")
    assert (loop.kind, loop.form, loop.length, loop.depth, loop.parent) == ("while", "while", None, 0, None)
    assert loop.default == at.SiteChoice("while", 1) and not loop.has_ys and loop.num_carry == 2
    check_source(loop, "T:while")
    assert site.id == f"{loop.id}/{local('T:while-body')}"
    assert (site.length, site.depth, site.parent) == (5, 1, loop.id)


def test_fori_loop_with_a_traced_trip_count_is_a_while_site_of_form_fori():
    fori, loop = at.sites(dynamic_loops, X, jnp.int32(4))
    assert fori.id == local("T:dyn-fori", "fori") and (fori.kind, fori.form, fori.length) == ("while", "fori", None)
    assert loop.id == local("T:dyn-while", "while") and (loop.kind, loop.form) == ("while", "while")
    check_source(fori, "T:dyn-fori")


def in_checkpoint(x):
    return jax.checkpoint(lambda v: lax.scan(sin_body, v[0], v)[0])(x)  # T:remat


def in_remat_with_policy(x):
    f = jax.remat(lambda v: lax.scan(sin_body, v[0], v)[0], policy=jax.checkpoint_policies.nothing_saveable)  # T:remat2
    return f(x)


@pytest.mark.parametrize("fn, tag", [(in_checkpoint, "T:remat"), (in_remat_with_policy, "T:remat2")])
def test_scan_in_checkpoint_body(fn, tag):
    (site,) = at.sites(fn, X)
    assert site.id == local(tag)
    assert (site.length, site.depth) == (5, 0)
    check_source(site, tag)


@jax.custom_jvp
def cjvp(x):
    return lax.scan(sin_body, x[0], x)[0]  # T:cjvp


@cjvp.defjvp
def _cjvp_jvp(primals, tangents):
    return cjvp(primals[0]), tangents[0].sum()


@jax.custom_vjp
def cvjp(x):
    return lax.scan(sin_body, x[0], x)[0]  # T:cvjp


cvjp.defvjp(lambda x: (cvjp(x), x), lambda res, g: (g * jnp.ones_like(res),))


@pytest.mark.parametrize("fn, tag", [(cjvp, "T:cjvp"), (cvjp, "T:cvjp")])
def test_scan_in_custom_derivative_primal_body(fn, tag):
    (site,) = at.sites(lambda x: fn(x) + 1.0, X)
    assert site.id == local(tag)
    assert (site.kind, site.length, site.depth, site.parent) == ("scan", 5, 0, None)
    check_source(site, tag)


# --- fori_loop ------------------------------------------------------------------------


def static_fori(x):
    return lax.fori_loop(2, 9, lambda i, c: c * 1.1 + i, x)  # T:fori


def test_static_trip_fori_loop_is_a_scan_site():
    (site,) = at.sites(static_fori, X)
    assert site.id == local("T:fori", "fori")
    assert site.id.startswith("fori@")
    assert (site.kind, site.length, site.depth, site.parent, site.name) == ("scan", 7, 0, None, None)
    check_source(site, "T:fori")


# --- at.loop --------------------------------------------------------------------------


def loop_only(x, xs):
    return at.loop(lambda c, x: (c * 0.5 + x, c.sum()), x, xs, name="only")  # T:loop-only


def test_at_loop_is_exactly_one_site():
    sites = at.sites(loop_only, X[:3], jnp.ones((6, 3)))
    assert len(sites) == 1, sites
    (site,) = sites
    assert (site.id, site.kind, site.name, site.length, site.depth, site.parent) == ("only", "loop", "only", 6, 0, None)
    check_source(site, "T:loop-only")


def loops_nested(x):
    def outer_body(c, _):
        c = at.loop(lambda d, _: (d + 1.0, None), c, length=4, name="inner")[0]  # T:ln-inner
        c = lax.scan(lambda d, _: (d * 2.0, None), c, None, length=2)[0]  # T:ln-scan
        return c, None

    return at.loop(outer_body, x, length=3, name="outer")[0]  # T:ln-outer


def test_at_loop_inside_at_loop_and_scan_inside_at_loop():
    sites = at.sites(loops_nested, X)
    assert [s.id for s in sites] == ["outer", "inner", f"outer/{local('T:ln-scan')}"]
    outer, inner, scan = sites
    assert (outer.kind, outer.name, outer.length, outer.depth, outer.parent) == ("loop", "outer", 3, 0, None)
    assert (inner.kind, inner.name, inner.length, inner.depth, inner.parent) == ("loop", "inner", 4, 1, "outer")
    assert (scan.kind, scan.name, scan.length, scan.depth, scan.parent) == ("scan", None, 2, 1, "outer")
    check_source(outer, "T:ln-outer")
    check_source(inner, "T:ln-inner")
    check_source(scan, "T:ln-scan")


def loop_inside_scan(x):
    def body(c, _):
        return at.loop(lambda d, _: (jnp.cos(d), None), c, length=5, name="in-scan")[0], None  # T:lis-loop

    return lax.scan(body, x, None, length=2)[0]  # T:lis-scan


def test_at_loop_inside_a_plain_scan():
    outer, loop = at.sites(loop_inside_scan, X)
    assert outer.id == local("T:lis-scan") and outer.kind == "scan"
    assert (loop.id, loop.kind, loop.name, loop.depth, loop.parent, loop.length) == (
        "in-scan",
        "loop",
        "in-scan",
        1,
        outer.id,
        5,
    )
    check_source(loop, "T:lis-loop")


# --- distinct ids -------------------------------------------------------------------------


def twin_loops(x):
    a = lax.scan(lambda c, _: (c + 1.0, None), x, None, length=3)[0]  # T:twin-a
    b = lax.scan(lambda c, _: (c + 1.0, None), a, None, length=3)[0]  # T:twin-b
    return b


def helper(x):
    return lax.scan(lambda c, _: (c * 0.5, None), x, None, length=3)[0]  # T:helper


def helper_twice(x):
    return helper(helper(x))


def helper_in_two_scans(x):
    a = lax.scan(lambda c, _: (helper(c), None), x, None, length=2)[0]  # T:h2-a
    b = lax.scan(lambda c, _: (helper(c), None), a, None, length=2)[0]  # T:h2-b
    return b


def named_helper(x):
    return at.loop(lambda c, _: (c + 1.0, None), x, length=2, name="step")[0]


def test_identical_loops_at_different_lines_get_different_ids():
    a, b = at.sites(twin_loops, X)
    assert (a.id, b.id) == (local("T:twin-a"), local("T:twin-b"))


def test_same_line_reached_twice_gets_a_counter():
    a, b = at.sites(helper_twice, X)
    assert a.id == local("T:helper")
    assert b.id == f"{a.id}#2"
    assert a.source == b.source
    check_source(b, "T:helper")


def test_same_helper_under_different_parents_is_told_apart_by_parent():
    sites = at.sites(helper_in_two_scans, X)
    pa, pb = local("T:h2-a"), local("T:h2-b")
    assert [s.id for s in sites] == [pa, f"{pa}/{local('T:helper')}", pb, f"{pb}/{local('T:helper')}"]


def test_same_at_loop_name_reached_twice_gets_a_counter():
    sites = at.sites(lambda x: named_helper(named_helper(x)), X)
    assert [s.id for s in sites] == ["step", "step#2"]
    assert all(s.kind == "loop" and s.name == "step" for s in sites)


# --- arguments --------------------------------------------------------------------------------


def with_static(x, *, n, scale=1.0):
    return lax.scan(lambda c, _: (c * scale, None), x, None, length=n)[0]  # T:static


def test_kwargs_and_static_python_values_and_abstract_inputs():
    (site,) = at.sites(with_static, X, n=7, scale=0.5)
    assert site.length == 7 and site.id == local("T:static")
    (site,) = at.sites(with_static, jax.ShapeDtypeStruct((5,), jnp.float32), n=2)
    assert site.length == 2
    assert at.sites(lambda x: jnp.sin(x), X) == []


def test_sites_do_not_run_the_function_on_data():
    calls = []

    def f(x):
        calls.append(type(x))
        return lax.scan(lambda c, _: (c + 1.0, None), x, None, length=3)[0]

    at.sites(f, X)
    assert len(calls) == 1 and issubclass(calls[0], jax.core.Tracer)


# --- fingerprints and stability across processes -----------------------------------------------

PROGRAM = """
import jax, jax.numpy as jnp
from jax import lax
import autotune as at


@jax.custom_jvp
def cj(x):
    return lax.scan(lambda c, _: (jnp.sin(c), None), x, None, length=3)[0]


@cj.defjvp
def _cj_jvp(p, t):
    return cj(p[0]), t[0]


@jax.custom_vjp
def cv(x):
    return lax.fori_loop(0, 3, lambda i, c: c * 1.5, x)


cv.defvjp(lambda x: (cv(x), None), lambda r, g: (g,))


@jax.jit
def callee(x):
    return lax.scan(lambda c, _: (c + BODY_CONST, None), x, None, length=4, unroll=SCAN_UNROLL)[0]


def fn(x):
    y = lax.cond(x.sum() > 0, callee, lambda v: v, x)
    y = jax.checkpoint(cj)(y) + cv(y)
    y = lax.while_loop(lambda c: c[0] < 2,
                       lambda c: (c[0] + 1, at.loop(lambda d, _: (d * 0.5, None), c[1], length=4,
                                                    name="w", unroll=LOOP_UNROLL)[0]),
                       (0, y))[1]
    return y
"""

RUNNER = """
import json, sys
sys.path.insert(0, ".")
import jax.numpy as jnp
import autotune.program._sites as S
import prog
p = S.trace_program(prog.fn, (jnp.ones(3, jnp.float32),))
print(json.dumps({"ids": [s.id for s in p.sites], "fingerprint": p.fingerprint}))
"""


def program_source(body_const="1.0", scan_unroll=1, loop_unroll=1):
    return (
        PROGRAM.replace("BODY_CONST", body_const)
        .replace("SCAN_UNROLL", str(scan_unroll))
        .replace("LOOP_UNROLL", str(loop_unroll))
    )


def load_program(tmp_path, sub, **edits):
    d = tmp_path / sub
    d.mkdir()
    (d / "prog.py").write_text(program_source(**edits))
    spec = importlib.util.spec_from_file_location(f"_autotune_prog_{sub}", d / "prog.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return _sites.trace_program(mod.fn, (jnp.ones(3, jnp.float32),))


def test_ids_and_fingerprint_are_stable_across_processes(tmp_path):
    dirs = []
    for sub in ("a", "b"):  # two directories: the ids must not depend on where the project lives
        d = tmp_path / sub
        d.mkdir()
        (d / "prog.py").write_text(program_source())
        (d / "run.py").write_text(RUNNER)
        dirs.append(d)
    procs = []
    for d, seed in zip(dirs, ("1", "2")):
        env = repo_env(PYTHONHASHSEED=seed)
        procs.append(
            subprocess.Popen(
                [sys.executable, "run.py"], cwd=d, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
            )
        )
    results = []
    for p in procs:
        out, err = p.communicate(timeout=120)
        assert p.returncode == 0, err
        results.append(json.loads(out.strip().splitlines()[-1]))
    first, second = results
    assert first == second
    assert len(first["ids"]) == 5 and "w" in first["ids"]
    assert any(i.startswith("while@prog.py:") for i in first["ids"])
    assert any(i.startswith("fori@prog.py:") for i in first["ids"])
    assert len(first["fingerprint"]) >= 16


def test_fingerprint_ignores_unroll_edits_but_not_body_edits(tmp_path):
    base = load_program(tmp_path, "base")
    unrolled = load_program(tmp_path, "unrolled", scan_unroll=2, loop_unroll=4)
    full = load_program(tmp_path, "full", scan_unroll="True")
    edited = load_program(tmp_path, "edited", body_const="2.0")
    assert [s.id for s in unrolled.sites] == [s.id for s in base.sites]
    assert unrolled.fingerprint == base.fingerprint
    assert full.fingerprint == base.fingerprint
    assert edited.fingerprint != base.fingerprint
    assert load_program(tmp_path, "again").fingerprint == base.fingerprint


def test_fingerprint_changes_when_a_loop_moves_or_its_length_changes():
    def f3(x):
        return lax.scan(lambda c, _: (c + 1.0, None), x, None, length=3)[0]

    def f4(x):
        return lax.scan(lambda c, _: (c + 1.0, None), x, None, length=4)[0]

    def g3(x):
        return lax.scan(lambda c, _: (c + 1.0, None), x, None, length=3)[0]

    fp = {name: _sites.trace_program(f, (X,)).fingerprint for name, f in [("f3", f3), ("f4", f4), ("g3", g3)]}
    assert fp["f3"] != fp["f4"]
    assert fp["f3"] != fp["g3"]  # same program text, loop on another line: another site id
    assert _sites.trace_program(f3, (X,)).fingerprint == fp["f3"]


# --- readable ids for loops without a user frame -------------------------------------------------


def test_installed_code_is_never_the_users(tmp_path):
    import numpy as np

    from autotune.program import _compat

    assert _compat.installed_path(jax.__file__) == os.path.join("jax", "__init__.py")
    assert _compat.installed_path(np.__file__) == os.path.join("numpy", "__init__.py")  # site-packages
    assert _compat.installed_path(os.__file__) == "os.py"  # the standard library
    assert _compat.installed_path(at.__file__) == os.path.join("autotune", "__init__.py")
    assert _compat.installed_path("<frozen runpy>") is not None
    assert _compat.installed_path(THIS) is None and _compat.installed_path("<string>") is None
    link = tmp_path / "linked-site"  # another spelling of site-packages is still site-packages
    link.symlink_to(os.path.dirname(os.path.dirname(np.__file__)))
    assert _compat.installed_path(str(link / "numpy" / "__init__.py")) == os.path.join("numpy", "__init__.py")


LIBRARY = """
import jax
import jax.numpy as jnp
from jax import lax


@jax.jit
def smooth(x):  # jitted library code: its traceback stops at this function
    return lax.scan(lambda c, _: (jnp.sin(c) * 0.5, None), x, None, length=3)[0]  # LIB-SCAN


def settle(x):
    return lax.while_loop(lambda c: c.sum() < 10.0, lambda c: c * 2.0 + 0.5, x)  # LIB-WHILE
"""


def import_library(tmp_path, name):
    """A helper module in a folder JAX is told to treat as library code, as for an installed package."""
    import jax.extend.source_info_util as siu

    d = tmp_path / "site-packages-like"
    d.mkdir()
    (d / f"{name}.py").write_text(LIBRARY)
    siu.register_exclusion(str(d))
    spec = importlib.util.spec_from_file_location(name, d / f"{name}.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    line = {
        tag: i
        for i, text in enumerate(LIBRARY.splitlines(), 1)
        for tag in ("LIB-SCAN", "LIB-WHILE")
        if text.rstrip().endswith(f"# {tag}")
    }
    return mod, d / f"{name}.py", line


def test_a_loop_in_jitted_library_code_is_named_by_the_users_call_and_keeps_the_library_line(tmp_path):
    """JAX cuts the loop's traceback at the library's jit: the user's line is in the
    traceback of the jit equation around it."""
    lib, path, line = import_library(tmp_path, "smoothlib")

    def user(x):
        return lib.smooth(x) * 2.0  # T:jit-lib-call

    (site,) = at.sites(user, X)
    assert site.id == local("T:jit-lib-call")
    check_source(site, "T:jit-lib-call")
    assert site.library_source == f"site-packages-like/smoothlib.py:{line['LIB-SCAN']}"
    assert at.sites(user, X)[0].id == site.id  # stable


def test_with_no_user_frame_the_library_line_names_the_loop(tmp_path):
    lib, path, line = import_library(tmp_path, "smoothlib2")
    (site,) = at.sites(lib.smooth, X)  # the traced function is the library's own
    assert site.id == f"scan@smoothlib2.py:{line['LIB-SCAN']}"
    assert site.source == f"{path}:{line['LIB-SCAN']}" and site.library_source is None


def test_a_loop_in_plain_library_code_is_named_by_the_users_call(tmp_path):
    lib, _, line = import_library(tmp_path, "settlelib")
    (site,) = at.sites(lambda x: lib.settle(x), X)  # T:lib-call
    assert site.id == local("T:lib-call", "while")
    assert site.library_source == f"site-packages-like/settlelib.py:{line['LIB-WHILE']}"


def test_a_loop_the_user_writes_has_no_library_line():
    (site,) = at.sites(lambda x: lax.scan(sin_body, x, x)[0], X)
    assert site.library_source is None and site.to_dict()["library_source"] is None


def test_loops_jax_builds_inside_its_own_jitted_functions_get_readable_ids():
    """jax.scipy.special.exp1 and hyp1f1 build their loops inside their own jit: the user's
    call names them, JAX's line is kept as the library line. Traced on their own, no frame is
    user code: the id names JAX's file and line instead. (Both build loops on jax 0.10 and 0.12;
    jax 0.12 made random.poisson a primitive and deprecated bessel_jn, which this test used.)"""
    programs = [
        (lambda x: jax.scipy.special.exp1(x), X, "T:exp1"),  # T:exp1
        (lambda x: jax.scipy.special.hyp1f1(1.0, 2.0, x), X, "T:hyp1f1"),  # T:hyp1f1
    ]
    for fn, arg, tag in programs:
        sites = at.sites(fn, arg)
        assert sites, "this JAX version builds no loop here"
        for site in sites:
            assert re.fullmatch(re.escape(local(tag, site.id.split("@")[0])) + r"(#\d+)?", site.id), site.id
            assert site.library_source and re.match(r"jax/.*\.py:\d+$", site.library_source), site
        assert [s.id for s in at.sites(fn, arg)] == [s.id for s in sites]
    for site in at.sites(functools.partial(jax.scipy.special.expn, 3), X):
        assert "?" not in site.id and re.fullmatch(r"(scan|while|fori)@\w+\.py:\d+(#\d+)?", site.id), site.id
        assert site.source is not None and site.source.endswith(site.id.split("@")[1].split("#")[0])


# --- form and derived ------------------------------------------------------------------------------


def scan_and_fori(x):
    x = lax.scan(lambda c, _: (jnp.sin(c), None), x, None, length=3)[0]  # T:fs-scan
    return lax.fori_loop(0, 3, lambda i, c: jnp.cos(c) * i, x)  # T:fs-fori


def test_form_says_what_the_user_wrote_and_derived_marks_the_backward_loops():
    plain = by_id(at.sites(scan_and_fori, X))
    assert [(s.kind, s.form, s.derived) for s in plain.values()] == [("scan", "scan", False), ("scan", "fori", False)]
    sites = at.sites(jax.grad(lambda x: scan_and_fori(x).sum()), X)
    forward = [s for s in sites if not s.derived]
    backward = [s for s in sites if s.derived]
    assert sorted(s.form for s in forward) == sorted(s.form for s in backward) == ["fori", "scan"]
    assert all(s.kind == "scan" and s.reverse for s in backward)
    assert {s.id for s in forward} == set(plain)


def test_at_loop_under_grad_and_checkpoint_keeps_one_user_loop():
    def f(x, xs):
        return at.loop(lambda c, x: (jnp.tanh(c * x), None), x, xs, name="rnn")[0]

    xs = jnp.ones((4, 5))
    for g in (jax.grad(lambda x: f(x, xs).sum()), jax.grad(lambda x: jax.checkpoint(f)(x, xs).sum())):
        sites = at.sites(g, X)
        loops = [s for s in sites if s.kind == "loop"]
        assert [(s.id, s.form, s.derived) for s in loops] == [("rnn", "loop", False)]
        assert all(s.derived and s.form == "loop" and s.kind == "scan" for s in sites if s.kind != "loop")
        assert len(sites) >= 2


def test_to_dict_is_json_and_has_form_and_derived():
    for site in at.sites(in_while, X) + at.sites(jax.grad(lambda x: scan_and_fori(x).sum()), X):
        d = site.to_dict()
        assert json.loads(json.dumps(d)) == d
        assert {"form", "derived", "kind", "length", "default"} <= set(d)
        assert "?" not in d["id"]
