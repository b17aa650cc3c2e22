"""The search space: remainder-aware unroll factors, per-site choices, Optuna params, body copies."""

import dataclasses
import math
import re

import jax
import jax.numpy as jnp
import optuna
from jax import lax

import autotune as at
from autotune.program._space import Space, body_copies, copies_of_unroll, unroll_options


def powers_of_two(length):
    k, out = 1, []
    while k < length:
        out.append(k)
        k *= 2
    return out


# --- unroll factors -------------------------------------------------------------------------------


def test_the_issue_example_and_round_lengths():
    assert unroll_options(31) == [1, 2, 5, 10, 15]
    assert [copies_of_unroll(31, k) for k in unroll_options(31)] == [1, 3, 6, 11, 16]
    assert 16 not in unroll_options(31)  # 16 + 31 mod 16 = 31 copies: as many as full unroll
    for length in (8, 16, 32, 64, 128):
        assert unroll_options(length) == powers_of_two(length)
    assert unroll_options(100) == [1, 2, 4, 9, 20, 32, 50]


def test_copies_of_unroll_is_what_scan_emits():
    assert copies_of_unroll(31, 16) == 31 and copies_of_unroll(31, 15) == 16
    assert copies_of_unroll(8, 8) == 8 and copies_of_unroll(8, 20) == 8 and copies_of_unroll(8, 1) == 1
    assert copies_of_unroll(0, 4) == 0


def test_the_rule_holds_for_every_length():
    for length in range(2, 300):
        options = unroll_options(length)
        assert options == sorted(set(options)) and options[0] == 1, length
        targets = powers_of_two(length)[1:]
        assert len(options) <= len(targets) + 1, length  # about log2(L): never more than powers of two
        for k in options[1:]:
            assert copies_of_unroll(length, k) < length, (length, k)  # never as costly as full unroll
            t = min(targets, key=lambda t: abs(math.log(k / t)))
            assert t / math.sqrt(2) <= k <= t * math.sqrt(2), (length, k)  # one per octave
            if copies_of_unroll(length, t) < length:  # no more waste than the octave's power of two
                assert length % k <= max(length % t, k // 8), (length, k, t)


def test_the_default_unroll_stays_in_the_space():
    assert 3 in unroll_options(8, default=3)
    assert unroll_options(8, default=8) == [1, 2, 4]  # the full unroll is "for", not a factor
    assert 7 in unroll_options(31, default=7)


def test_total_copies_are_below_the_powers_of_two():
    """Summed over the offered factors, the remainder-aware space emits no more copies."""
    worse = [
        n
        for n in range(2, 500)
        if sum(copies_of_unroll(n, k) for k in unroll_options(n))
        > sum(copies_of_unroll(n, k) for k in powers_of_two(n))
    ]
    assert worse == []


# --- sites in the space ----------------------------------------------------------------------------


def program(x, xs):
    def body(c, x):
        c = lax.scan(lambda d, _: (jnp.sin(d) + 0.1, None), c, None, length=5)[0]
        return c * x, c.sum()

    c, ys = lax.scan(body, x, xs)
    c = at.loop(lambda d, _: (jnp.tanh(d), None), c, length=6, name="refine")[0]
    c = lax.while_loop(
        lambda s: s[0] < 3,
        lambda s: (s[0] + 1, lax.scan(lambda d, _: (d * 0.5, None), s[1], None, length=4)[0]),
        (0, c),
    )[1]
    c = lax.scan(lambda d, _: (d + 1.0, None), c, None, length=1)[0]
    return c, ys


X, XS = jnp.ones(3), jnp.ones((8, 3))


def program_space():
    sites = at.sites(program, X, XS)
    return sites, Space(sites), {s.length if s.kind != "while" else "while": s for s in sites}


def test_entries_per_kind():
    sites, space, by = program_space()
    assert len(sites) == 6 and len(space.entries) == 5  # the length-1 scan has nothing to tune
    entries = {e.site.id: e for e in space.entries}
    assert entries[by[8].id].reprs == ("scan", "for") and entries[by[8].id].unrolls == (1, 2, 4)
    assert entries["refine"].reprs == ("scan", "for", "fori")
    assert entries[by["while"].id].reprs == ("while",) and entries[by["while"].id].guards == ("select", "cond")
    assert len(space) == math.prod(len(e.choices) for e in space.entries)


def test_configs_are_distinct_and_the_default_comes_first():
    _, space, _ = program_space()
    configs = list(space.configs())
    assert configs[0] == space.default() and len(configs) == len(set(configs)) == len(space)
    for config in configs:
        assert space.from_params(space.to_params(config)) == config


def test_suggest_with_a_real_optuna_trial_stays_in_the_space():
    _, space, by = program_space()
    allowed = set(space.configs())
    study = optuna.create_study(sampler=optuna.samplers.RandomSampler(seed=0))
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    guard = f"{by['while'].id}.guard"
    seen = set()
    for _ in range(60):
        trial = study.ask()
        config = space.suggest(trial)
        assert config in allowed
        choice = config[by["while"].id]
        assert (guard in trial.params) == (choice.unroll > 1)
        study.tell(trial, 0.0)
        seen.add(config)
    assert len(seen) > 30


def test_body_copies():
    sites, _, by = program_space()
    assert body_copies(by[8], at.SiteChoice("for")) == 8
    assert body_copies(by[8], at.SiteChoice("scan", 4)) == 4
    assert body_copies(by[5], at.SiteChoice("scan", 2)) == 3  # 2 + 5 mod 2
    assert body_copies(by[6], at.SiteChoice("fori", 4)) == 6  # 4 + 6 mod 4 = 6
    assert body_copies(by["while"], at.SiteChoice("while", 4, "cond")) == 4
    assert body_copies(by["while"], at.SiteChoice("while", 1)) == 1


def test_copies_multiply_along_the_nesting():
    _, space, by = program_space()
    default = space.copies(space.default())
    assert default == {s.id: 1 for s in space.all_sites}
    outer, inner = by[8], by[5]
    assert inner.parent == outer.id
    copies = space.copies(at.Config({outer.id: {"repr": "for"}, inner.id: {"unroll": 2}}))
    assert copies[outer.id] == 8 and copies[inner.id] == 8 * 3
    copies = space.copies({outer.id: {"unroll": 2}})
    assert copies[inner.id] == 2
    in_while = by[4]
    assert in_while.parent == by["while"].id
    copies = space.copies({by["while"].id: {"repr": "while", "unroll": 4}, in_while.id: {"repr": "for"}})
    assert copies[by["while"].id] == 4 and copies[in_while.id] == 16


def test_copies_count_what_the_compiler_sees():
    """One body op per copy in the compiled program: the count the study fits compile time
    to. (The optimised HLO is read: JAX 0.10 outlines repeated bodies in StableHLO.)"""

    def f(x):
        return lax.scan(lambda c, _: (jnp.sin(c) * 0.9 + 0.1, None), x, None, length=31)[0]

    (site,) = at.sites(f, X)
    space = Space([site])
    for k in unroll_options(31) + [16]:
        cfg = at.Config({site.id: {"unroll": k}})
        text = jax.jit(at.with_config(f, cfg)).lower(X).compile().as_text()
        assert len(re.findall(r"\bsine\(", text)) == space.copies(cfg)[site.id], k


def test_the_leanest_config_rolls_every_loop_and_saves_nothing_where_a_body_is_checkpointed():
    def step(ws, x):
        def loss(ws):
            h = at.loop(lambda c, _: (jnp.tanh(c), None), x, length=4, name="warm", repr="for")[0]
            body = jax.checkpoint(lambda c, w: (jnp.tanh(c @ w), None), policy=jax.checkpoint_policies.dots_saveable)
            y, _ = lax.scan(body, h, ws)
            return jnp.sum(y)

        return jax.grad(loss)(ws)

    sites = at.sites(step, jnp.ones((3, 4, 4)), jnp.ones((2, 4)))
    lean = Space(sites).leanest()
    assert lean["warm"] == at.SiteChoice("scan", 1)  # the user's `for`, rolled
    policies = {s.id: lean[s.id].policy for s in sites if s.id != "warm"}
    assert sorted(policies.values(), key=str) == [None, "nothing"]  # the derived scan holds the checkpoint
    assert all(lean[s.id].unroll == 1 and lean[s.id].repr == "scan" for s in sites)
    # A body that already saves nothing (a plain jax.checkpoint) keeps its own policy: nothing to add.
    plain = [dataclasses.replace(s, policy="nothing") if s.policy else s for s in sites]
    assert all(c.policy is None for c in Space(plain).leanest().values())
