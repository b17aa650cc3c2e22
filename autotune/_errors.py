"""Errors raised by autotune. Each message says what is wrong and what to do."""

import threading
import warnings

_warned: set[tuple] = set()
_warned_lock = threading.Lock()


class AutotuneError(Exception):
    """Base class of every error autotune raises on purpose."""


class ConfigError(AutotuneError, ValueError):
    """A config names an unknown loop site or an invalid choice for a site."""


class TraceError(AutotuneError):
    """The function could not be traced or re-emitted by autotune."""


class CacheError(AutotuneError):
    """The tuning cache could not be opened, read or written."""


class CacheSchemaError(CacheError):
    """The tuning cache was written by a schema this version does not understand."""


class CacheImportError(CacheError, ValueError):
    """An exported cache file is malformed; nothing was imported."""


class StudyError(AutotuneError):
    """A study file or tuning request is unusable."""


def warn_once(key: tuple, message: str, stacklevel: int = 2) -> None:
    """Warn ``message`` (a ``RuntimeWarning``) the first time this process sees ``key``: a
    decorated function called in a loop, or a bad environment variable read per call, warns
    once. ``stacklevel`` counts from the caller, as for ``warnings.warn``."""
    with _warned_lock:
        if key in _warned:
            return
        _warned.add(key)
    warnings.warn(message, RuntimeWarning, stacklevel=stacklevel + 1)


_INTERNAL = ("autotune", "jax", "jaxlib")


def user_frame():
    """The frame of the user's line: walking out from the caller, the first frame of a module
    outside autotune, JAX and jaxlib (a decorated function warns from inside jit's trace)."""
    import sys

    frame = sys._getframe(1)
    while frame is not None:
        name = frame.f_globals.get("__name__") or ""
        if name.split(".")[0] not in _INTERNAL:
            return frame
        frame = frame.f_back
    return None


def warn_user_once(key: tuple, message: str, category: type[Warning] = RuntimeWarning) -> None:
    """:func:`warn_once`, shown at the user's line (:func:`user_frame`), not at autotune's."""
    with _warned_lock:
        if key in _warned:
            return
        _warned.add(key)
    frame = user_frame()
    if frame is None:
        warnings.warn(message, category, stacklevel=2)
        return
    g = frame.f_globals
    # as warnings.warn does, but without module_globals: a `python -c` program's loader
    # cannot give its source, and a warning must never break the user's program
    warnings.warn_explicit(
        message,
        category,
        frame.f_code.co_filename,
        frame.f_lineno,
        module=g.get("__name__"),
        registry=g.setdefault("__warningregistry__", {}),
    )


MAX_ERROR_TEXT = 2000
"""The most characters of an exception's text kept in a reason or a message (a trial's
reason is stored in the study; a compiler's error can be megabytes)."""


def error_text(
    exc: BaseException, *, first_line: bool = True, with_type: bool = True, limit: int = MAX_ERROR_TEXT
) -> str:
    """``Type: message`` of an exception, the one way autotune quotes one: its first
    non-blank line (or all of it with ``first_line=False``), at most ``limit`` characters;
    just ``Type`` when it has no message. ``with_type=False``: the message alone (a protocol
    that sends the type apart).

    Example::

        >>> error_text(ValueError("bad shape\\n  traceback..."))
        'ValueError: bad shape'
        >>> error_text(KeyError())
        'KeyError'
    """
    text = str(exc).strip()
    if first_line and text:
        text = next(line.strip() for line in text.splitlines() if line.strip())
    if not with_type and text:
        return text[:limit]
    return (f"{type(exc).__name__}: {text}" if text else type(exc).__name__)[:limit]
