"""Cache locations: a URL or a path to a SQLAlchemy `URL`, the SQLite file behind it, and
`redact`, the one way a location is shown to people (passwords never are).

``Cache.url`` keeps the real URL (other processes connect with it); every message, every
``repr`` and ``Cache.display_url`` go through `redact`::

    >>> redact("postgresql://me:s3cret@db.example/autotune")
    'postgresql://me:***@db.example/autotune'
"""

from __future__ import annotations

import hashlib
import os

from sqlalchemy.engine import URL, make_url
from sqlalchemy.exc import ArgumentError

from autotune._errors import CacheError
from autotune._paths import default_cache_location, redact, redact_text, sqlite_file  # noqa: F401 (re-exported)

HINT = "pass e.g. sqlite:///path/cache.db or /path/cache.db"


def resolve_url(url: str | os.PathLike | None) -> URL:
    """Turn a SQLAlchemy URL, a file path or None into a SQLAlchemy `URL`.

    Arguments:
        url: a URL containing ``"://"``, a filesystem path (``str`` or `pathlib.Path`)
            of a SQLite file, or None for `default_cache_location`.

    Returns:
        The URL; SQLite file paths are made absolute (``~`` expanded).

    Raises:
        CacheError: when `url` is neither a usable URL nor a path (the message shows it redacted).
    """
    text = default_cache_location() if url is None else url
    if not isinstance(text, (str, os.PathLike)):
        raise CacheError(
            f"A cache must be a SQLAlchemy URL, a file path or None, got "
            f"{type(text).__name__} {redact(repr(text))}; {HINT}."
        )
    text = os.fspath(text)
    if not isinstance(text, str) or not text.strip():
        raise CacheError(f"The cache location {text!r} is empty or not text; {HINT}.")
    if "://" not in text:
        return URL.create("sqlite", database=os.path.abspath(os.path.expanduser(text)))
    try:
        parsed = make_url(text)
        parsed.get_dialect()
    except (ArgumentError, ValueError) as e:
        raise CacheError(
            f"The cache location {redact(text)!r} is not a SQLAlchemy URL or a file path "
            f"({redact_text(str(e), text)}); {HINT}."
        ) from None
    path = sqlite_file(parsed)
    return parsed if path is None else parsed.set(database=path)


def url_hash(url: URL) -> str:
    """A short hash naming a database independently of its password (for per-database folders)."""
    return hashlib.sha256(redact(url).encode()).hexdigest()[:16]
