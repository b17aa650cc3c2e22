"""Root ignores permission bits: rerun one test as root without CAP_DAC_OVERRIDE, or skip."""

import contextlib
import os
import shutil
import subprocess
import sys

import pytest

_CAPS = "-dac_override,-dac_read_search,-fowner"


def rerun_without_dac_override(test_file: str, test_name: str, env: dict, timeout: float, why: str = "") -> None:
    """Run ``test_file::test_name`` again under ``setpriv`` with the permission-override
    capabilities dropped, and assert it passed; skip, saying why, where that is impossible."""
    reason = (
        "directory permission bits are not enforced for this user (root, or CAP_DAC_OVERRIDE), so "
        "chmod 0o555 cannot make a directory read-only, and {}" + (f"; {why}" if why else "")
    )
    setpriv = shutil.which("setpriv")
    if os.environ.get("AUTOTUNE_TEST_NO_DAC") or os.geteuid() != 0 or setpriv is None:
        pytest.skip(reason.format("setpriv cannot drop it here"))
    if subprocess.run([setpriv, f"--bounding-set={_CAPS}", "true"], capture_output=True).returncode != 0:
        pytest.skip(reason.format("this container does not allow dropping capabilities with setpriv"))
    done = subprocess.run(
        [
            setpriv,
            f"--bounding-set={_CAPS}",
            sys.executable,
            "-m",
            "pytest",
            "-q",
            "-p",
            "no:cacheprovider",
            f"{test_file}::{test_name}",
        ],
        env={**env, "AUTOTUNE_TEST_NO_DAC": "1"},
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    assert done.returncode == 0 and " passed" in done.stdout, done.stdout + done.stderr


@contextlib.contextmanager
def read_only_dir(directory):
    """Make ``directory`` read-only (``chmod 0o555``) for the block and give back its mode after.

    Yields True when the permission bits are enforced, False for a user that overrides them
    (root): such a test reruns itself with :func:`rerun_without_dac_override` and returns.
    """
    directory.chmod(0o555)
    try:
        probe = directory / "probe"
        try:
            probe.touch()
        except PermissionError:
            yield True
        else:
            probe.unlink()
            yield False
    finally:
        directory.chmod(0o755)
