"""Which config a decorated function's call signature gets: `read_config` and its `Lookup`.

Runs inside the first call per signature (jit's trace), so it stays cheap: the entry is
read by `cache._fastread.Reader` (a SQLite file through the standard library), and the
modules of that path are imported on a background thread when the first function is
decorated (`prefetch`), while the program builds its inputs. Every problem is the default
config and one warning, never an exception.
"""

from __future__ import annotations

import os
import threading
from dataclasses import dataclass
from typing import Any

from . import _keys, _paths
from ._config import Config
from ._errors import warn_once


@dataclass(frozen=True)
class Lookup:
    """Which config a call signature gets, and why.

    Attributes:
        config: the config applied.
        source: ``"cache"`` (a tuned entry for this program, signature and device),
            ``"default"`` (no entry), ``"default (cache error)"`` (the cache could not be read),
            or ``"default (error)"`` (autotune failed on this program: trace, fingerprint,
            key or replay; the function ran as under ``jax.jit``).
        entry: the cache entry, or None.
        fingerprint, signature, device_key: the key that was looked up (``"?"`` where unknown).
        error: the problem, when there was one.
    """

    config: Config
    source: str
    entry: Any
    fingerprint: str
    signature: str
    device_key: str
    error: str | None = None


def open_cache(cache: Any):
    """``cache`` as an `at.Cache` (this imports SQLAlchemy)."""
    from .cache import Cache

    return cache if isinstance(cache, Cache) else Cache(cache)


def _import_call_path() -> None:
    try:
        from . import _rewrite, _select, _sites  # noqa: F401
        from .cache import _fastread  # noqa: F401
    except Exception:  # noqa: BLE001 - the first call imports what it needs itself, and reports
        pass


_prefetch_started = threading.Event()


def prefetch() -> None:
    """Start importing the first call's modules on a background thread (once per process)."""
    if not _prefetch_started.is_set():
        _prefetch_started.set()
        threading.Thread(target=_import_call_path, name="autotune-prefetch", daemon=True).start()


def cache_location(cache_arg: Any, cache: Any) -> str:
    """The cache as a warning names it (password redacted)."""
    where = cache if cache is not None else (cache_arg or os.environ.get(_paths.ENV_CACHE))
    return _paths.redact(where) if where else "the default cache"


def read_config(ctl: Any, program: Any, signature: str) -> Lookup:
    """The config the `Autotuned` ``ctl`` applies to ``program`` with ``signature``.

    A cache that cannot be read, or an entry that does not fit the program, is the default
    config and one warning naming the cache; an entry measured for other call counts than
    ``ctl.expected_calls`` is applied with one warning that says how to re-tune.

    Raises:
        Exception: only what fingerprinting ``program`` raises (the caller warns).
    """
    fingerprint = program.fingerprint
    try:
        device_key = _keys.device_key(_keys.device_info())
    except Exception as exc:  # no backend: jit itself will say so
        return Lookup(Config(), "default (cache error)", None, fingerprint, signature, "?", str(exc))
    try:
        # Tuned for another call count or weights: the lookup re-picks with the one rule.
        entry = ctl.reader.lookup(
            ctl.key,
            fingerprint,
            signature,
            device_key,
            expected_calls=ctl.expected_calls,
            compile_weight=ctl.compile_weight,
            runtime_weight=ctl.runtime_weight,
        )
        if entry is None:
            if ctl.on_miss == "warn":
                warn_once(
                    ("miss", ctl.key, signature),
                    f"autotune: no tuned config for {ctl.key} with signature {signature} on "
                    f"{device_key}; running the default config. Tune it with "
                    f"`{ctl.__name__}.tune(*args)` or `autotune tune FILE`.",
                    stacklevel=4,
                )
            return Lookup(Config(), "default", None, fingerprint, signature, device_key)
        config = Config.from_dict(entry.config)
        # Validate against this program: a foreign or hand-edited entry must not break the call.
        from ._rewrite import Plan

        Plan(program.sites, config)
    except Exception as exc:
        where = cache_location(ctl._cache_arg, ctl.reader.opened)
        warn_once(
            ("cache-error", where, type(exc).__name__),
            f"autotune: the tuning cache {where} could not be used ({type(exc).__name__}: {exc}); "
            f"{ctl.key} runs its default config. Fix or remove the cache, or pass cache= another location.",
            stacklevel=4,
        )
        return Lookup(Config(), "default (cache error)", None, fingerprint, signature, device_key, str(exc))
    if not entry.covers(ctl.expected_calls):
        from . import _select

        calls, covered = ctl.expected_calls, _select.range_text(entry.covered_range)
        command = entry.retune_command(calls) or f"{ctl.__name__}.with_options(expected_calls={calls:g}).tune(*args)"
        warn_once(
            ("range", ctl.key, signature, calls),
            f"autotune: {ctl.key} was measured completely only for {covered} "
            f"calls, and expected_calls={calls:g} lies outside, so configs that were not measured for that "
            f"many calls could be cheaper; it runs the best measured one ({config}). "
            f"Re-tune for {calls:g} calls: {command}",
            stacklevel=4,
        )
    return Lookup(config, "cache", entry, fingerprint, signature, device_key)
