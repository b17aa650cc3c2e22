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


def sqlalchemy_shows(url):
    """A location as SQLAlchemy shows it, password hidden: what `_paths.redact` shows without it."""
    from sqlalchemy.engine import URL, make_url
    from sqlalchemy.exc import ArgumentError

    if isinstance(url, str):
        if "://" not in url:
            return _paths.redact_text(url)
        try:
            url = make_url(url)
        except (ArgumentError, ValueError):
            return _paths.redact_text(url)
    assert isinstance(url, URL)
    if url.get_backend_name() == "sqlite" and url.database not in (None, "", ":memory:"):
        if not url.database.startswith("file:"):
            return "sqlite:///" + os.path.abspath(os.path.expanduser(url.database))
    return _paths._QUERY_RE.sub(lambda m: f"{m['head']}***", url.render_as_string(hide_password=True))


URLS = [
    "postgresql://me:pw@db.example/autotune",
    "postgresql+psycopg://u:p%40ss@h:5432/db?sslmode=require",
    "postgresql://u%3Ax%40y:p%2Fw@h/d%20b?application_name=a%20b&sslmode=require&password=x",
    "postgresql://u@h/db?b=2&a=1&b=1&pwd=k&empty=",
    "postgresql://:secret@h/db",
    "postgresql://u:@h/db",
    "postgresql://u@[::1]:5432/db",
    "postgresql://u@[host]/db",
    "mysql+pymysql://u:p@h:3306/db?charset=utf8mb4",
    "postgresql://me:pw@host:notaport/db",
    "postgresql://me:pw@host:/db",
    "postgresql://h:+5_0/db",
    "postgresql://",
    "postgresql:///db",
    "sqlite://",
    "sqlite:///:memory:",
    "sqlite:///relative/c.db",
    "sqlite:///~/c.db",
    "sqlite:////tmp/a b/c.db",
    "sqlite:////tmp/a%20b/c.db?mode=ro",
    "sqlite:///file:x.db?mode=ro&uri=true",
    "sqlite+pysqlite:////tmp/x.db",
    "not a url://x",
    "/tmp/plain/path.db",
    "",
]


@pytest.mark.parametrize("url", URLS)
def test_redact_shows_a_url_as_sqlalchemy_does(url):
    from sqlalchemy.engine import make_url

    assert _paths.redact(url) == sqlalchemy_shows(url)
    parsed = _paths._parse_url(url)
    if "://" in url and parsed is not None:
        assert _paths.redact(make_url(url)) == sqlalchemy_shows(make_url(url))  # a SQLAlchemy URL, as the cache has
        assert _paths._password_of(url) == make_url(url).password


def test_redact_parses_any_text_as_sqlalchemy_does():
    """Texts drawn from the characters a URL is made of: the parse agrees with SQLAlchemy's on each."""
    import random

    rng = random.Random(45)
    pieces = ["postgresql", "+psycopg", "sqlite", "://", ":", "@", "/", "?", "&", "=", "[", "]", "%40", "%2F", "%"]
    pieces += ["u", "pw", "h", "5432", "db", "password", "a b", "~", "x", "+", ";", "#", "::1", "file:"]
    for _ in range(3000):
        head = rng.choice(["", "postgresql://", "sqlite:///"])
        text = head + "".join(rng.choice(pieces) for _ in range(rng.randint(1, 14)))
        assert _paths.redact(text) == sqlalchemy_shows(text), text
        assert _paths._password_of(text) == password_seen_by_sqlalchemy(text), text


def password_seen_by_sqlalchemy(text):
    from sqlalchemy.engine import make_url
    from sqlalchemy.exc import ArgumentError

    try:
        return make_url(text).password
    except (ArgumentError, ValueError):
        m = _paths._USERINFO_RE.search(text)
        return m["secret"] if m else None
