"""The tiered cost (`autotune.select._tiered`): the default serves while the winner compiles beside it."""

from __future__ import annotations

import pytest

from autotune.select._tiered import qualifies, tiered_cost, tiered_figures

# default: compiles in 0.1 s, 10 ms a call; winner: compiles in 2.1 s, 1 ms a call
D_C, D_R, W_C, W_R = 0.1, 0.01, 2.1, 0.001


def plain(c, r, n):
    return c + n * r


def test_the_default_serves_until_the_winner_is_ready():
    f = tiered_figures(D_C, D_R, W_C, W_R, 1000, slowdown=1.0)
    assert f.ready_s == pytest.approx(2.0)  # the winner's compile started with the default's
    assert f.served_by_default == pytest.approx(200)
    assert f.cost == pytest.approx(D_C + 200 * D_R + 800 * W_R)


def test_slowdown_charges_the_calls_beside_the_compile():
    f = tiered_figures(D_C, D_R, W_C, W_R, 1000, slowdown=2.0)
    assert f.served_by_default == pytest.approx(100)  # each call takes 20 ms beside the compile
    assert f.cost == pytest.approx(D_C + 100 * 2 * D_R + 900 * W_R)


def test_competing_compiles_start_the_winner_after_the_default():
    f = tiered_figures(D_C, D_R, W_C, W_R, 1000, slowdown=1.0, competes=True)
    assert f.ready_s == pytest.approx(W_C) and f.served_by_default == pytest.approx(210)


def test_few_calls_finish_on_the_default_and_never_wait():
    assert tiered_cost(D_C, D_R, W_C, W_R, 50, slowdown=1.5) == pytest.approx(D_C + 50 * 1.5 * D_R)
    assert tiered_cost(D_C, D_R, W_C, W_R, 0) == pytest.approx(D_C)


@pytest.mark.parametrize("n", [0, 1, 10, 100, 200, 500, 10**4, 10**6])
def test_with_no_slowdown_it_is_never_above_either_plain_cost(n):
    t = tiered_cost(D_C, D_R, W_C, W_R, n, slowdown=1.0)
    assert t <= plain(D_C, D_R, n) + 1e-12 and t <= plain(W_C, W_R, n) + 1e-12


def test_near_the_crossover_it_is_below_both():
    n = (W_C - D_C) / (D_R - W_R)  # the plain costs cross here
    t = tiered_cost(D_C, D_R, W_C, W_R, n, slowdown=1.05)
    assert t < plain(D_C, D_R, n) and t < plain(W_C, W_R, n)


def test_weights_apply_to_compile_and_calls():
    t = tiered_cost(D_C, D_R, W_C, W_R, 1000, slowdown=1.0, compile_weight=2.0, runtime_weight=3.0)
    assert t == pytest.approx(2 * D_C + 3 * (200 * D_R + 800 * W_R))


def test_bad_figures_are_refused():
    with pytest.raises(ValueError, match="slowdown"):
        tiered_cost(D_C, D_R, W_C, W_R, 10, slowdown=0.5)
    with pytest.raises(ValueError, match="calls"):
        tiered_cost(D_C, D_R, W_C, W_R, -1)


def test_which_winners_qualify():
    assert qualifies(0.1, 2.1)
    assert not qualifies(0.1, 0.15)  # under 2x the default's
    assert not qualifies(0.01, 0.03)  # 2x, but only 20 ms more: not worth a thread
