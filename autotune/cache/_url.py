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
import re
from typing import Any

from sqlalchemy.engine import URL, make_url
from sqlalchemy.exc import ArgumentError

from .._errors import CacheError
from .._paths import default_cache_location

HINT = "pass e.g. sqlite:///path/cache.db or /path/cache.db"
_SECRET_QUERY_KEYS = ("password", "passwd", "pwd", "sslpassword")
# scheme://user:password@  anywhere in a text, for URLs SQLAlchemy cannot parse
_USERINFO_RE = re.compile(r"(?P<head>[A-Za-z][A-Za-z0-9+.\-]*://[^:/@\s'\"]*):(?P<secret>[^@\s'\"]*)@")
_QUERY_RE = re.compile(r"(?P<head>[?&;\s](?:%s)=)(?P<secret>[^&\s'\"]*)" % "|".join(_SECRET_QUERY_KEYS),
                       re.IGNORECASE)


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
        raise CacheError(f"A cache must be a SQLAlchemy URL, a file path or None, got "
                         f"{type(text).__name__} {redact(repr(text))}; {HINT}.")
    text = os.fspath(text)
    if not isinstance(text, str) or not text.strip():
        raise CacheError(f"The cache location {text!r} is empty or not text; {HINT}.")
    if "://" not in text:
        return URL.create("sqlite", database=os.path.abspath(os.path.expanduser(text)))
    try:
        parsed = make_url(text)
        parsed.get_dialect()
    except (ArgumentError, ValueError) as e:
        raise CacheError(f"The cache location {redact(text)!r} is not a SQLAlchemy URL or a file path "
                         f"({redact_text(str(e), text)}); {HINT}.") from None
    path = sqlite_file(parsed)
    return parsed if path is None else parsed.set(database=path)


def sqlite_file(url: URL) -> str | None:
    """Absolute path of a SQLite file URL, or None (not SQLite, in-memory or a ``file:`` URI)."""
    if url.get_backend_name() != "sqlite":
        return None
    db = url.database or ""
    if db in ("", ":memory:") or db.startswith("file:"):
        return None
    return os.path.abspath(os.path.expanduser(db))


def redact(url: Any) -> str:
    """A cache location as people may see it: the password (in the user info or the query) is ``***``.

    Arguments:
        url: a SQLAlchemy `URL`, URL text, a file path, or an object with a ``display_url``
            (an ``at.Cache``). Text that does not parse as a URL is redacted by pattern.

    Returns:
        The text; a SQLite file shows as ``sqlite:///`` + its path, unescaped.

    Example::

        >>> redact("postgresql+psycopg://u:p%40ss@h:5432/db?sslmode=require")
        'postgresql+psycopg://u:***@h:5432/db?sslmode=require'
    """
    shown = getattr(url, "display_url", None)
    if isinstance(shown, str):
        return shown
    if isinstance(url, os.PathLike):
        url = os.fspath(url)
    if isinstance(url, str):
        if "://" not in url:
            return redact_text(url)
        try:
            url = make_url(url)
        except (ArgumentError, ValueError):
            return redact_text(url)
    if not isinstance(url, URL):
        return redact_text(str(url))
    path = sqlite_file(url)
    if path is not None:
        return f"sqlite:///{path}"
    return _QUERY_RE.sub(lambda m: f"{m['head']}***", url.render_as_string(hide_password=True))


def redact_text(text: str, url: Any = None) -> str:
    """``text`` with every ``scheme://user:password@`` and ``password=...`` redacted, and, when
    ``url`` is given, with that URL's password removed wherever it appears."""
    text = _USERINFO_RE.sub(lambda m: f"{m['head']}:***@", text)
    text = _QUERY_RE.sub(lambda m: f"{m['head']}***", text)
    password = _password_of(url)
    if password and len(password) >= 4:  # a shorter one would garble the text; the patterns above cover URLs
        text = text.replace(password, "***")
    return text


def url_hash(url: URL) -> str:
    """A short hash naming a database independently of its password (for per-database folders)."""
    return hashlib.sha256(redact(url).encode()).hexdigest()[:16]


def _password_of(url: Any) -> str | None:
    if url is None:
        return None
    if not isinstance(url, URL):
        try:
            url = make_url(os.fspath(url))
        except (ArgumentError, ValueError, TypeError):
            m = _USERINFO_RE.search(str(url))
            return m["secret"] if m else None
    pw = url.password
    return None if pw is None else str(pw)
