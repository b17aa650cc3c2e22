"""The benchmarks of jax-autotune: scripts that measure the tuner, not part of the ``autotune`` wheel.

Run each from the repository root as a module, ``python -m benchmarks.<name> [--help]``:

- ``bench``: every study, the tuned program against plain ``jax.jit`` (``docs/results/``);
  ``make bench`` runs ``python -m benchmarks.bench --quick``.
- ``e2e``: a user's whole script, plain ``jax.jit`` against ``@at.autotuned``, in fresh processes.
- ``overhead``: what the decorator costs (``import autotune``, the first call, a cache hit).
- ``import_time``: a bulk cache import of 100,000 entries beside concurrent writers (the lock-hold figure).
- ``builders``: tuning wall with builder processes compiling ahead against compiling in the runner.
- ``beside``: the slowdown of calls beside a compile, the tuner's stand-in against the winner's build.
- ``tier_routes``: what a short process would pay to cancel tier-up's build or compile it in a builder.
- ``processes``: one program's run time across fresh processes.
- ``pruning``: trials saved by pruning against the time they cost.
- ``workers``: scale-out with several worker processes (PostgreSQL).
- ``xla``: XLA flags against the loop structure.
- ``load_clock``: the clocks under a CPU burner (how load moves the figures).
- ``seed_experiment``: how much a tuning result depends on the sampler's seed.
- ``stable_winners``: whether the winners survive a loaded machine.
- ``tpu_builders_check``, ``tpu_xla_probe``, ``tpu_rnn_probe``: checks run on a TPU host (``scripts/tpu_session.sh``).

Modules whose name starts with ``_`` are helpers (``_burner``: a CPU burner; ``_studies``,
``_study_run``, ``_final``, ``_tables``: the pieces of ``bench``). The demo of ``make demo``
stays in ``scripts/demo.py``. No module here imports one that imports it back (``tests/test_benchmarks.py``).
"""
