"""The benchmarks of jax-autotune: scripts that measure the tuner, not part of the ``autotune`` wheel.

Run each from the repository root as a module, ``python -m benchmarks.<name> [--help]``:

- ``bench``: every study, the tuned program against plain ``jax.jit`` (``docs/results/``);
  ``make bench`` runs ``python -m benchmarks.bench --quick``.
- ``e2e``: a user's whole script, plain ``jax.jit`` against ``@at.autotuned``, in fresh processes;
  ``--tier-up`` adds the tier-up decorator.
- ``overhead``: what the decorator costs (``import autotune``, the first call, a cache hit).
- ``import_time``: a bulk cache import of 100,000 entries beside concurrent writers (the lock-hold figure).
- ``builders``: tuning wall with builder processes compiling ahead against compiling in the runner.
- ``beside``: the slowdown of calls beside a compile, the tuner's stand-in against the winner's build.
- ``workers``: scale-out with several worker processes (SQLite or PostgreSQL).
- ``shapes``: a second input signature tuned from its neighbour's configs against a fresh study of it.
- ``xla``: what XLA's compile options trade on the CPU (the catalog and the default of ``--xla``).
- ``tpu_xla_probe``: which compile options the TPU's compiler takes and what they trade.

``scripts/tpu_session.sh`` runs ``bench``, ``e2e``, ``builders`` and ``tpu_xla_probe`` on a TPU host;
``scripts/gpu_bench.sh`` runs ``bench`` on a GPU box. Modules whose name starts with ``_`` are helpers
(``_burner``: a CPU burner; ``_studies``, ``_study_run``, ``_final``, ``_rows``, ``_xla_grid``, ``_tables``,
``_walls``: the pieces of ``bench``, whose tables, run facts and fresh-process re-measure the others
reuse). The demo of ``make demo`` stays in
``scripts/demo.py``. An experiment that answered its question left this package: its figures and
the commit that holds its script are in ``docs/results/``. No module here imports one that imports
it back (``tests/test_benchmarks.py``).
"""
