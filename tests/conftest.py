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
import tempfile

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


def pytest_unconfigure(config):
    shutil.rmtree(_SESSION_CACHE_HOME, ignore_errors=True)
