# The commands: `make demo`, `make test` (lint, then the whole suite: the tests marked timing serially,
# after the rest), `make test-fast` (the inner loop: lint, then every test not marked slow or timing),
# `make lint`. Each creates the venv when missing.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
# The extras installed with the package: `make test EXTRAS=test,examples` adds the
# real-library studies' dependencies (CI does); one stamp per set, so changing it reinstalls.
EXTRAS ?= test
comma := ,
STAMP := $(VENV)/.installed-$(subst $(comma),-,$(EXTRAS))

# The suite runs in JOBS pytest-xdist processes, a test file per process (module fixtures, such as
# a study tuned once for a file's tests, are not repeated): `make test JOBS=1` runs it serially.
# JOBS is one more than the CPUs (at most 8): many tests wait on a subprocess, a lock, a timeout or
# a signal, and a third process fills those gaps on 2 cores (measured: docs/results/design-figures.md).
# The heavier load widens compile noise; confirmation compiles every round where the machine's
# compiles wander, so a pick never rests on one compile sample (docs/explanation/confirmation.md).
# --no-loadscope-reorder keeps tests/conftest.py's order (the longest files first): pytest-xdist
# would otherwise hand out the files with the most tests first, and the slow end-to-end files,
# which hold few tests, would run last, one process alone at the end.
JOBS ?= $(shell $(PYTHON) -c 'import os; print(min(8, (os.cpu_count() or 1) + 1))')
XDIST = $(if $(filter-out 0 1,$(JOBS)),-n $(JOBS) --dist loadfile --no-loadscope-reorder,)

.PHONY: demo test test-fast lint install bench docs docs-build clean

# constraints.txt: versions held back in these venvs (why: in the file); not requirements of the package.
$(STAMP): pyproject.toml constraints.txt
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q -c constraints.txt -e '.[$(EXTRAS)]'
	@touch $(STAMP)

install: $(STAMP)

demo: $(STAMP)
	$(BIN)/python scripts/demo.py

lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

# Two passes. The tests marked timing assert on real measured timings (a decision made on them, or
# a wall-clock bound), which the load of their siblings can flip: they run after the rest, alone
# (JOBS=1). Both passes always run; the target fails if either does (exit status 5, nothing
# selected, as when PYTEST_ARGS names files without timing tests, counts as passing).
test: lint
	$(BIN)/python -m pytest -q $(XDIST) -m "not timing" $(PYTEST_ARGS); rest=$$?; \
	echo "=== the tests marked timing, serially ==="; \
	$(BIN)/python -m pytest -q -m timing $(PYTEST_ARGS); timing=$$?; \
	for rc in $$rest $$timing; do [ $$rc -eq 0 ] || [ $$rc -eq 5 ] || exit 1; done

# What it leaves out (`make test` runs them): the tests marked timing (real measured timings, which
# load can flip; tests/study/test_decisions.py asserts the same decisions on canned figures), the
# tests marked slow (real tuning studies end to end through the CLI, the benchmark scripts' smoke
# runs, PostgreSQL scale-out with several processes, the loaded-machine and sharded-mesh checks, and
# every test that took over 4 s (3.4 s on a quiet machine) on this 2-core machine: so the quick loop fits 3 minutes)
# and tests/test_real_studies*.py (the real-library studies: flax, diffrax, blackjax, optax,
# numpyro, equinox, optimistix).
test-fast: lint
	$(BIN)/python -m pytest -q $(XDIST) -m "not slow and not timing" --ignore-glob="tests/test_real_studies*.py" $(PYTEST_ARGS)

bench: $(STAMP)
	$(BIN)/python -m benchmarks.bench --quick

# The documentation site: `make docs` serves it at http://127.0.0.1:8000, `make docs-build`
# builds it into build/site with --strict (a broken link or a missing API name fails).
docs:
	$(MAKE) install EXTRAS=docs
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs serve

docs-build:
	$(MAKE) install EXTRAS=docs
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict

clean:
	rm -rf $(VENV) .venv312 build *.egg-info
