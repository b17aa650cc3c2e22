"""Default locations and private files (autotune/_paths.py), under a real umask."""

from __future__ import annotations

import os

import pytest
from _repo import mode

from autotune import _paths


def test_default_locations_follow_the_environment(tmp_path, monkeypatch):
    monkeypatch.delenv("AUTOTUNE_CACHE", raising=False)
    monkeypatch.delenv("AUTOTUNE_STORAGE", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert _paths.user_cache_dir() == str(tmp_path / "xdg" / "autotune")
    assert _paths.default_cache_location() == str(tmp_path / "xdg" / "autotune" / "cache.db")
    assert _paths.default_storage_url() == f"sqlite:///{tmp_path / 'xdg' / 'autotune' / 'studies.db'}"
    monkeypatch.setenv("XDG_CACHE_HOME", "  ")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert _paths.default_cache_location() == str(tmp_path / "home" / ".cache" / "autotune" / "cache.db")
    monkeypatch.setenv("AUTOTUNE_CACHE", " postgresql://u@h/db ")
    assert _paths.default_cache_location() == "postgresql://u@h/db"
    assert _paths.default_storage_url() == "postgresql://u@h/db"  # a server cache keeps its studies there too
    monkeypatch.setenv("AUTOTUNE_STORAGE", str(tmp_path / "s.db"))
    assert _paths.default_storage_url() == f"sqlite:///{tmp_path / 's.db'}"


@pytest.mark.parametrize(
    "cache,storage",
    [
        ("/a/b/cache.db", "sqlite:////a/b/studies.db"),
        ("sqlite:////a/b/cache.db", "sqlite:////a/b/studies.db"),
        ("sqlite:///:memory:", "sqlite:///:memory:"),
        ("postgresql://u@h/db", "postgresql://u@h/db"),
    ],
)
def test_the_study_storage_sits_beside_the_cache(cache, storage, monkeypatch):
    monkeypatch.delenv("AUTOTUNE_STORAGE", raising=False)
    assert _paths.default_storage_url(cache) == storage


def test_storage_url_of_a_path_or_url(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert _paths.storage_url("s.db") == f"sqlite:///{tmp_path / 's.db'}"
    assert _paths.storage_url("postgresql://u@h/db") == "postgresql://u@h/db"


def test_private_dirs_are_0700_whatever_the_umask_and_existing_ones_are_kept(tmp_path, umask_000):
    existing = tmp_path / "existing"
    existing.mkdir(mode=0o755)
    os.chmod(existing, 0o755)
    _paths.make_private_dirs(existing / "a" / "b")
    assert mode(existing) == 0o755  # not ours: never chmod-ed
    assert mode(existing / "a") == 0o700 and mode(existing / "a" / "b") == 0o700
    _paths.make_private_dirs(existing / "a" / "b")  # idempotent
    (tmp_path / "file").write_text("x")
    with pytest.raises(OSError):
        _paths.make_private_dirs(tmp_path / "file" / "sub")


def test_private_files_are_0600_whatever_the_umask(tmp_path, umask_000):
    assert _paths.create_private_file(tmp_path / "f")
    assert mode(tmp_path / "f") == 0o600 and (tmp_path / "f").read_bytes() == b""
    (tmp_path / "f").write_bytes(b"kept")
    assert not _paths.create_private_file(tmp_path / "f") and (tmp_path / "f").read_bytes() == b"kept"
    _paths.write_private(tmp_path / "new" / "data.bin", b"\x00\x01")
    assert (tmp_path / "new" / "data.bin").read_bytes() == b"\x00\x01"
    assert mode(tmp_path / "new" / "data.bin") == 0o600 and mode(tmp_path / "new") == 0o700
    other = tmp_path / "other.bin"
    other.write_bytes(b"old")
    os.chmod(other, 0o666)
    _paths.write_private(other, b"new")  # replaced atomically by a private file
    assert other.read_bytes() == b"new" and mode(other) == 0o600
    assert sorted(p.name for p in (tmp_path / "new").iterdir()) == ["data.bin"]  # no temp file left
