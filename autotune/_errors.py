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
