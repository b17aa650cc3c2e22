"""Where the cache and the study storage live by default, and how private files are made.

The cache holds what a user's programs ran on, so everything autotune creates for it is
private to the user, whatever the umask: directories 0700, files 0600. Directories that
already exist keep their mode (autotune never chmods what it did not create).
"""

from __future__ import annotations

import os
import re
import tempfile
from dataclasses import dataclass
from typing import Any
from urllib.parse import parse_qsl, quote, quote_plus, unquote

ENV_CACHE = "AUTOTUNE_CACHE"
ENV_STORAGE = "AUTOTUNE_STORAGE"
DIR_MODE = 0o700
FILE_MODE = 0o600


def user_cache_dir() -> str:
    """``$XDG_CACHE_HOME/autotune``, or ``~/.cache/autotune`` when ``XDG_CACHE_HOME`` is unset."""
    base = os.environ.get("XDG_CACHE_HOME", "").strip() or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "autotune")


def default_cache_location() -> str:
    """Return ``$AUTOTUNE_CACHE`` if set, else ``$XDG_CACHE_HOME/autotune/cache.db``
    (``~/.cache/autotune/cache.db`` when ``XDG_CACHE_HOME`` is unset)."""
    env = os.environ.get(ENV_CACHE, "").strip()
    if env:
        return env
    return os.path.join(user_cache_dir(), "cache.db")


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


_SECRET_QUERY_KEYS = ("password", "passwd", "pwd", "sslpassword")
# scheme://user:password@  anywhere in a text, for URLs SQLAlchemy cannot parse
_USERINFO_RE = re.compile(r"(?P<head>[A-Za-z][A-Za-z0-9+.\-]*://[^:/@\s'\"]*):(?P<secret>[^@\s'\"]*)@")
_QUERY_RE = re.compile(
    r"(?P<head>[?&;\s](?:" + "|".join(_SECRET_QUERY_KEYS) + r")=)(?P<secret>[^&\s'\"]*)", re.IGNORECASE
)
# A database URL as SQLAlchemy's make_url reads one (its pattern): the parts are taken and shown
# here with the standard library, exactly as SQLAlchemy's URL shows them with the password hidden
# (tests/test_paths.py compares the two), so that only autotune.cache imports SQLAlchemy.
_URL_RE = re.compile(
    r"(?P<name>[\w+]+)://(?:(?P<username>[^:/]*)(?::(?P<password>[^@]*))?@)?"
    r"(?:(?:\[(?P<ipv6host>[^/?]+)\]|(?P<ipv4host>[^/:?]+))?(?::(?P<port>[^/?]*))?)?"
    r"(?:/(?P<database>[^?]*))?(?:\?(?P<query>.*))?"
)


@dataclass(frozen=True)
class _Url:
    """A database URL's parts, as SQLAlchemy's ``URL`` holds them (unquoted)."""

    driver: str
    username: str | None
    password: str | None
    host: str | None
    port: int | None
    database: str | None
    query: dict[str, list[str]]

    def shown(self) -> str:
        """The URL with its password as ``***`` (``URL.render_as_string(hide_password=True)``)."""
        text = self.driver + "://"
        if self.username is not None:
            text += quote(self.username, safe=" +") + (":***" if self.password is not None else "") + "@"
        if self.host is not None:
            text += f"[{self.host}]" if ":" in self.host else self.host
        if self.port is not None:
            text += f":{self.port}"
        if self.database is not None:
            text += "/" + quote(self.database, safe=" +/")
        if self.query:
            pairs = (f"{quote_plus(k)}={quote_plus(v)}" for k in sorted(self.query) for v in self.query[k])
            text += "?" + "&".join(pairs)
        return text


def _parse_url(text: str) -> _Url | None:
    """The parts of URL ``text``, or None where SQLAlchemy's make_url refuses it (or its port)."""
    m = _URL_RE.match(text)
    if m is None:
        return None
    query: dict[str, list[str]] = {}
    for key, value in parse_qsl(m["query"] or ""):
        query.setdefault(key, []).append(value)
    port = m["port"]
    if port is not None:
        try:
            port = int(port)
        except ValueError:
            return None
    username, password, database = (
        None if v is None else unquote(v) for v in m.group("username", "password", "database")
    )
    return _Url(m["name"], username, password, m["ipv4host"] or m["ipv6host"], port, database, query)


def _text_of(url: Any) -> Any:
    """A SQLAlchemy ``URL`` (anything with ``render_as_string``, as `autotune.cache` hands one) as
    its full text; anything else as it is."""
    render = getattr(url, "render_as_string", None)
    return render(hide_password=False) if callable(render) else url


def redact(url: Any) -> str:
    """A database location as people may see it: the password (in the user info or the query) is ``***``.

    This is the only way autotune shows a cache or study-storage URL: in messages, ``repr``,
    tables, JSON output and reports. ``Cache.url`` keeps the real URL (other processes connect
    with it).

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
    url = _text_of(url)
    if isinstance(url, os.PathLike):
        url = os.fspath(url)
    if not isinstance(url, str):
        return redact_text(str(url))
    parsed = _parse_url(url) if "://" in url else None
    if parsed is None:
        return redact_text(url)
    path = _sqlite_path(parsed.driver, parsed.database)
    if path is not None:
        return f"sqlite:///{path}"
    return _QUERY_RE.sub(lambda m: f"{m['head']}***", parsed.shown())


def redact_text(text: str, url: Any = None) -> str:
    """``text`` with every ``scheme://user:password@`` and ``password=...`` redacted, and, when
    ``url`` is given, with that URL's password removed wherever it appears."""
    text = _USERINFO_RE.sub(lambda m: f"{m['head']}:***@", text)
    text = _QUERY_RE.sub(lambda m: f"{m['head']}***", text)
    password = _password_of(url)
    if password and len(password) >= 4:  # a shorter one would garble the text; the patterns above cover URLs
        text = text.replace(password, "***")
    return text


def storage_file(url: str) -> str | None:
    """The file of a ``sqlite:///`` storage URL as autotune writes them (:func:`storage_url`), or
    None (another database, or an in-memory one)."""
    if not url.startswith("sqlite:///"):
        return None
    path = url[len("sqlite:///") :]
    return None if path in ("", ":memory:") or path.startswith("file:") else path


def sqlite_file(url: Any) -> str | None:
    """Absolute path of a SQLite file URL (a SQLAlchemy ``URL``), or None (not SQLite, in-memory
    or a ``file:`` URI)."""
    return _sqlite_path(url.drivername, url.database)


def _sqlite_path(driver: str, database: str | None) -> str | None:
    if driver.split("+")[0] != "sqlite":
        return None
    db = database or ""
    if db in ("", ":memory:") or db.startswith("file:"):
        return None
    return os.path.abspath(os.path.expanduser(db))


def _password_of(url: Any) -> str | None:
    if url is None:
        return None
    url = _text_of(url)
    try:
        text = os.fspath(url)
    except TypeError:
        text = None
    parsed = _parse_url(text) if isinstance(text, str) else None
    if parsed is None:
        m = _USERINFO_RE.search(str(url))
        return m["secret"] if m else None
    return parsed.password


def read_only_path(path: str) -> bool:
    """Whether reads of ``path`` need the immutable read-only connection: the directory is
    not writable and the ``-wal``/``-shm`` files are absent (SQLite cannot open a WAL
    database read-only without them)."""
    return not os.access(os.path.dirname(path), os.W_OK) and not (
        os.path.exists(path + "-wal") and os.path.exists(path + "-shm")
    )


def make_private_dirs(path: str | os.PathLike) -> None:
    """Create directory ``path`` and any missing parents with mode 0700 (the umask does not apply).

    Existing directories are left as they are.

    Raises:
        OSError: a directory could not be created (e.g. a parent is a file or read-only).
    """
    path = os.path.abspath(os.fspath(path))
    missing = []
    while not os.path.isdir(path):
        missing.append(path)
        parent = os.path.dirname(path)
        if parent == path:
            break
        path = parent
    for d in reversed(missing):
        try:
            os.mkdir(d, DIR_MODE)
        except FileExistsError:
            if not os.path.isdir(d):
                raise
            continue  # another process made it first: it is theirs to set up
        os.chmod(d, DIR_MODE)  # mkdir's mode is masked by the umask


def create_private_file(path: str | os.PathLike) -> bool:
    """Create an empty file with mode 0600 if it does not exist (its directory must exist).

    Returns:
        True when this call created it; False when it already existed (its mode is kept).
    """
    try:
        fd = os.open(os.fspath(path), os.O_WRONLY | os.O_CREAT | os.O_EXCL, FILE_MODE)
    except FileExistsError:
        return False
    try:
        os.fchmod(fd, FILE_MODE)
    finally:
        os.close(fd)
    return True


def write_private(path: str | os.PathLike, data: bytes) -> None:
    """Write ``data`` to ``path`` atomically (a temp file in the same directory, then a rename),
    with mode 0600; missing directories are created 0700.

    Raises:
        OSError: the file could not be written.
    """
    path = os.path.abspath(os.fspath(path))
    make_private_dirs(os.path.dirname(path))
    fd, tmp = tempfile.mkstemp(prefix=".autotune-", suffix=".tmp", dir=os.path.dirname(path))
    try:
        with os.fdopen(fd, "wb") as f:
            os.fchmod(f.fileno(), FILE_MODE)
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
        tmp = None
    finally:
        if tmp is not None and os.path.exists(tmp):
            os.unlink(tmp)
