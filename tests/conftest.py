"""Shared test setup: real JAX, on CPU, and a cache directory of the session's own.

Tests that leave the cache location to the defaults (``$AUTOTUNE_CACHE``, else
``$XDG_CACHE_HOME/autotune``, and the ``studies.db`` beside it) must neither read nor write
the user's real cache, and two suites running at once (CI's two Python lines, a developer's
terminal beside CI) must not share studies: each session gets a private ``XDG_CACHE_HOME``,
inherited by every subprocess it starts, and the user's own autotune variables are unset.
"""

import os
import shutil
import signal
import sys
import tempfile

import pytest

# The suite runs on CPU wherever it runs (set before JAX is first imported).
os.environ.setdefault("JAX_PLATFORMS", "cpu")

_SESSION_CACHE_HOME = tempfile.mkdtemp(prefix="autotune-tests-")
os.environ["XDG_CACHE_HOME"] = _SESSION_CACHE_HOME
for _name in ("AUTOTUNE_CACHE", "AUTOTUNE_STORAGE", "AUTOTUNE_RECORD", "AUTOTUNE_RECORD_MAX_MB", "AUTOTUNE_LEASE_S"):
    os.environ.pop(_name, None)


def _survive(signum, frame):  # the session keeps ignoring it; its subprocesses start with the default
    pass


# Started in the background of a script or under `nohup`, this process inherits SIGINT or SIGHUP
# ignored, and so would every subprocess a test starts: a test of what a signal does to the CLI
# would then test nothing. An ignored signal is kept from killing the session (a Python
# handler), and exec() gives the subprocesses the default disposition back. The latch's own
# behaviour for an ignored signal is tested in test_interrupt.
for _sig, _handler in (
    (signal.SIGINT, signal.default_int_handler),
    (signal.SIGHUP, _survive),
    (signal.SIGTERM, _survive),
):
    if signal.getsignal(_sig) == signal.SIG_IGN:
        signal.signal(_sig, _handler)


# The files that take longest, run first: under pytest-xdist (`make test`, a file per process)
# a long file started last would leave the other process idle at the end (the Makefile passes
# --no-loadscope-reorder, else pytest-xdist hands out the files with the most tests first).
# Measured with --junitxml on 3.11, longest first; the order of everything else is pytest's.
LONGEST_FIRST = (
    "test_real_studies_mesh.py",
    "test_real_studies_tune_nn.py",
    "test_real_studies_tune_sci.py",
    "test_real_studies.py",
    "test_stable.py",
    "test_record_cli.py",
    "test_tune_cmd.py",
    "test_sharded.py",
    "test_bench.py",
    "test_demo.py",
    "test_optuna.py",
    "test_tune.py",
    "test_decorator.py",
    "test_axis_context.py",
    "test_interrupt.py",
    "test_faults.py",
    "test_worker_runner.py",
    "test_transfer.py",
    "test_follow.py",
    "test_channel.py",
    "test_postgres.py",
    "test_unrewritable.py",
    "test_while.py",
)


def pytest_collection_modifyitems(config, items):
    rank = {name: i for i, name in enumerate(LONGEST_FIRST)}
    items.sort(key=lambda item: rank.get(item.path.name, len(rank)))  # stable: the rest keep their order


def pytest_unconfigure(config):
    shutil.rmtree(_SESSION_CACHE_HOME, ignore_errors=True)


# ----------------------------------------------------------------- shared fixtures
# Plain values (ROOT, repo_env, python, mode, the timing presets) are importable from
# tests/_repo.py and tests/_presets.py, for module-level constants; these are their fixtures.


@pytest.fixture(scope="session")
def repo_root():
    """The repository's root folder (a Path)."""
    from _repo import ROOT

    return ROOT


@pytest.fixture
def subprocess_env(tmp_path):
    """An environment for subprocesses: the repository importable, on CPU, and a private cache
    (``$AUTOTUNE_CACHE`` under the test's ``tmp_path``)."""
    from _repo import repo_env

    return repo_env(AUTOTUNE_CACHE=str(tmp_path / "cache.db"))


@pytest.fixture
def umask_000():
    """The process umask set to 000 for the test (files come out as wide as the code lets them)."""
    old = os.umask(0)
    try:
        yield
    finally:
        os.umask(old)


@pytest.fixture(scope="session")
def pg_server():
    """A PostgreSQL server for the session (under pytest-xdist: one per worker, each on its own
    free port and folder), stopped and its folder deleted at the end. Unavailable: a LOUD skip,
    or a failure when $AUTOTUNE_REQUIRE_POSTGRES is set."""
    from pg_server import ENV_REQUIRE, PgServer, PgUnavailable

    server = PgServer()
    try:
        server.start()
    except PgUnavailable as e:
        message = f"POSTGRESQL UNAVAILABLE, scale-out tests NOT RUN: {e}"
        if os.environ.get(ENV_REQUIRE, "") not in ("", "0"):
            pytest.fail(message + f" (${ENV_REQUIRE} is set)", pytrace=False)
        print("\n" + "!" * 100 + "\n" + message + "\n" + "!" * 100, file=sys.__stderr__, flush=True)
        pytest.skip(message)
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def pg_url(pg_server):
    """A fresh, empty database on the session's server; dropped afterwards."""
    url = pg_server.create_database()
    try:
        yield url
    finally:
        try:
            pg_server.drop_database(url)
        except Exception:
            pass
