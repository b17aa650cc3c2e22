"""Where the cache and the study storage live by default."""

from __future__ import annotations

import os

ENV_CACHE = "AUTOTUNE_CACHE"
ENV_STORAGE = "AUTOTUNE_STORAGE"


def default_cache_location() -> str:
    """``$AUTOTUNE_CACHE`` if set, else ``$XDG_CACHE_HOME/autotune/cache.db`` (``~/.cache/...``)."""
    env = os.environ.get(ENV_CACHE, "").strip()
    if env:
        return env
    base = os.environ.get("XDG_CACHE_HOME", "").strip() or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "autotune", "cache.db")


def default_storage_url(cache: str | os.PathLike | None = None) -> str:
    """The Optuna storage beside a cache: ``$AUTOTUNE_STORAGE``, else for a SQLite cache a
    ``studies.db`` in the same folder, else the cache's own database URL."""
    env = os.environ.get(ENV_STORAGE, "").strip()
    if env:
        return storage_url(env)
    cache = os.fspath(cache) if cache is not None else default_cache_location()
    if "://" in cache and not cache.startswith("sqlite"):
        return cache
    path = cache.split(":///", 1)[1] if cache.startswith("sqlite") else cache
    if not path or path == ":memory:":
        return "sqlite:///:memory:"
    return "sqlite:///" + os.path.join(os.path.dirname(os.path.abspath(path)), "studies.db")


def storage_url(value: str | os.PathLike) -> str:
    """A SQLAlchemy URL for an Optuna storage given as a URL or a file path."""
    value = os.fspath(value)
    if "://" in value:
        return value
    return "sqlite:///" + os.path.abspath(value)


def redact(url: str | os.PathLike) -> str:
    """``url`` with any password replaced by ``***`` (``postgresql://user:***@host/db``):
    the only form in which autotune shows a database URL."""
    text = os.fspath(url)
    if "://" not in text:
        return text
    scheme, rest = text.split("://", 1)
    netloc, sep, tail = rest.partition("/")
    if "@" in netloc:
        creds, host = netloc.rsplit("@", 1)
        if ":" in creds:
            creds = creds.split(":", 1)[0] + ":***"
        netloc = f"{creds}@{host}"
    return f"{scheme}://{netloc}{sep}{tail}"
