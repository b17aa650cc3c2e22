"""Errors raised by autotune. Each message says what is wrong and what to do."""


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
