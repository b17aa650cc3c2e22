"""Cache locations (autotune/cache/_url.py): URLs and paths, and passwords that are never shown."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import jax.numpy as jnp
import pytest
from _faults import ENV, call_and_count, make, put_entry
from sqlalchemy.engine import make_url

import autotune as at
from autotune._errors import CacheError
from autotune.cache import Cache, redact
from autotune.cache._url import redact_text, resolve_url, sqlite_file, url_hash

SECRET = "s3cret-Pw"
PG = f"postgresql+psycopg://me:{SECRET}@127.0.0.1:1/autotune"  # port 1: refused at once


@pytest.mark.parametrize(
    "url,shown",
    [
        ("postgresql://me:pw@db.example/autotune", "postgresql://me:***@db.example/autotune"),
        (
            "postgresql+psycopg://u:p%40ss@h:5432/db?sslmode=require",
            "postgresql+psycopg://u:***@h:5432/db?sslmode=require",
        ),
        ("postgresql://u@h/db?password=hunter22", "postgresql://u@h/db?password=***"),
        ("mysql+pymysql://root:@localhost/x", "mysql+pymysql://root:***@localhost/x"),
        ("postgresql://u@h/db", "postgresql://u@h/db"),
        ("sqlite:////tmp/a b/c.db", "sqlite:////tmp/a b/c.db"),
        ("/tmp/plain/path.db", "/tmp/plain/path.db"),
        # not parseable by SQLAlchemy (a bad port): redacted by pattern
        ("postgresql://me:pw@host:notaport/db", "postgresql://me:***@host:notaport/db"),
    ],
)
def test_redact_hides_passwords_and_keeps_the_rest(url, shown):
    assert redact(url) == shown
    if "://" in url and "notaport" not in url:
        assert redact(make_url(url)) == shown


def test_redact_text_scrubs_urls_and_a_known_password_anywhere():
    text = f"could not connect to postgresql://me:{SECRET}@h/db (password {SECRET} rejected); dsn password={SECRET}"
    out = redact_text(text, PG)
    assert SECRET not in out and "postgresql://me:***@h/db" in out and "password=***" in out


def test_the_cache_shows_a_redacted_url_but_keeps_the_real_one():
    cache = Cache(PG)
    assert cache.url == PG  # other processes connect with it
    assert cache.display_url == "postgresql+psycopg://me:***@127.0.0.1:1/autotune"
    assert SECRET not in repr(cache) and "me:***@" in repr(cache)
    assert redact(cache) == cache.display_url
    assert cache.__getstate__() == {"url": PG}


def test_errors_never_show_the_password():
    cache = Cache(PG)
    for call in (lambda: cache.lookup("m:f", "fp", "sig", "dev"), lambda: cache.entries(), lambda: cache.pending()):
        with pytest.raises(CacheError) as info:
            call()
        message = str(info.value)
        assert SECRET not in message and "me:***@127.0.0.1:1" in message, message
    with pytest.raises(CacheError) as info:
        Cache(f"postgresql://me:{SECRET}@host:notaport/db")
    assert SECRET not in str(info.value) and "is not a SQLAlchemy URL" in str(info.value)


def test_paths_become_absolute_sqlite_urls(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert sqlite_file(resolve_url("rel/c.db")) == str(tmp_path / "rel" / "c.db")
    assert sqlite_file(resolve_url(Path("rel/c.db"))) == str(tmp_path / "rel" / "c.db")
    assert sqlite_file(resolve_url("sqlite:///rel/c.db")) == str(tmp_path / "rel" / "c.db")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert sqlite_file(resolve_url("~/c.db")) == str(tmp_path / "home" / "c.db")
    assert sqlite_file(resolve_url("sqlite://")) is None  # in memory
    assert sqlite_file(resolve_url("postgresql://u@h/db")) is None


@pytest.mark.parametrize("bad", [None, 42, "", "   "])
def test_unusable_locations_are_cache_errors(bad, monkeypatch):
    if bad is None:
        monkeypatch.setenv("AUTOTUNE_CACHE", "nosuchdialect://x")
    with pytest.raises(CacheError, match=r"sqlite:///path/cache\.db"):
        Cache(bad)


def test_url_hash_ignores_the_password():
    a, b = make_url("postgresql://me:one@h/db"), make_url("postgresql://me:two@h/db")
    assert url_hash(a) == url_hash(b) != url_hash(make_url("postgresql://me:one@h/other"))


def test_values_dir_beside_a_file_or_in_the_user_cache_dir(tmp_path, monkeypatch):
    assert Cache(tmp_path / "c.db").values_dir == str(tmp_path / "c.db.values")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    shown = Cache(PG).values_dir
    assert shown.startswith(str(tmp_path / "xdg" / "autotune" / "values-")) and SECRET not in shown
    assert Cache(PG).values_dir == Cache(PG.replace(SECRET, "other")).values_dir
    assert not os.path.exists(shown)  # named, not created


# ------------------------------------------- passwords through the decorator and the CLI


@pytest.mark.slow  # over 4 s: in `make test`, not `make test-fast`
def test_a_password_in_the_cache_url_is_never_shown(tmp_path):
    url = f"postgresql+psycopg://me:{SECRET}@127.0.0.1:1/autotune"  # nothing listens on port 1
    source, ours = call_and_count(make(url))
    assert source == "default (cache error)" and len(ours) == 1
    assert SECRET not in str(ours[0].message) and "me:***@127.0.0.1:1" in str(ours[0].message), str(ours[0].message)
    for args in (
        ["best", "--cache", url],
        ["list", "--cache", url],
        ["export", str(tmp_path / "x.json"), "--cache", url],
    ):
        r = subprocess.run(
            [sys.executable, "-m", "autotune", *args], env=ENV, capture_output=True, text=True, timeout=120
        )
        assert r.returncode == 2 and SECRET not in r.stdout + r.stderr and "me:***@" in r.stderr, r.stderr


@pytest.mark.slow  # over 4 s: in `make test`, not `make test-fast`
def test_import_and_export_messages_redact_a_real_servers_password(tmp_path, pg_url):
    url = pg_url.replace("postgresql://postgres@", f"postgresql://postgres:{SECRET}@")  # trust auth ignores it
    assert url != pg_url
    put_entry(tmp_path / "c.db", make(tmp_path / "c.db"), jnp.zeros(3))
    at.Cache(tmp_path / "c.db").export_json(tmp_path / "x.json")
    r = subprocess.run(
        [sys.executable, "-m", "autotune", "import", str(tmp_path / "x.json"), "--cache", url],
        env=ENV,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert r.returncode == 0 and "imported 1 entries and 0 pending records into postgresql://postgres:***@" in r.stdout
    assert SECRET not in r.stdout + r.stderr
    r = subprocess.run(
        [sys.executable, "-m", "autotune", "export", str(tmp_path / "y.json"), "--cache", url],
        env=ENV,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert r.returncode == 0 and "postgresql://postgres:***@" in r.stdout and SECRET not in r.stdout + r.stderr
    assert SECRET not in repr(at.Cache(url)) and at.Cache(url).url == url
