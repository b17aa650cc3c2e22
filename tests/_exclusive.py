"""A host device that admits one process, as libtpu does with a TPU chip (tests/fixtures/exclusive_device)."""

from __future__ import annotations

from _repo import ROOT, repo_env

EXCLUSIVE = ROOT / "tests" / "fixtures" / "exclusive_device"


def exclusive_env(tmp_path, **extra: str) -> dict[str, str]:
    """An environment whose JAX device admits one process, JAX_PLATFORMS unset as on a TPU host."""
    env = repo_env(EXCLUSIVE, AUTOTUNE_TEST_EXCLUSIVE=str(tmp_path / "device.lock"), **extra)
    env.pop("JAX_PLATFORMS")
    env["AUTOTUNE_CACHE"] = str(tmp_path / "cache.db")
    return env
