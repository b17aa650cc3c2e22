"""Which config a decorated function's call signature gets: `Lookups`, `read_config` and the `Lookup`.

Runs inside the first call per signature (jit's trace), so it stays cheap: the entry is
read by `cache._fastread.Reader` (a SQLite file through the standard library), and the
modules of that path are imported on a background thread when the first function is
decorated (`prefetch`), while the program builds its inputs. Every problem is the default
config and one warning, never an exception.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from autotune._errors import warn_user_once
from autotune.jit._target import Target
from autotune.program import _keys
from autotune.program._config import Config
from autotune.select._objective import Objective

if TYPE_CHECKING:
    from autotune.cache._fastread import Reader


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

    def __repr__(self) -> str:
        """One line: the config in notation, where it came from, and for a cached one its gain
        over the default and its cost, e.g. ``Lookup(smooth=scan×4 from cache, 1.8× the
        default, cost 0.0123 s)``."""
        parts = [f"{self._config_text()} from {self.source}"]
        gain, cost = self._figures()
        parts += [f"{gain} the default" if gain else "", f"cost {cost}" if cost else ""]
        if self.error:
            parts.append(f"error: {_short(self.error)}")
        return f"Lookup({', '.join(p for p in parts if p)})"

    def _repr_html_(self) -> str:
        """A small table for notebooks: the facts of :meth:`__repr__`, one per row."""
        import html

        gain, cost = self._figures()
        rows = [("config", self._config_text()), ("source", self.source)]
        rows += [(k, v) for k, v in (("gain over the default", gain), ("cost", cost)) if v]
        rows += [("error", _short(self.error))] if self.error else []
        body = "".join(f"<tr><th style='text-align:left'>{k}</th><td>{html.escape(v)}</td></tr>" for k, v in rows)
        return f"<table><caption>Lookup</caption>{body}</table>"

    def _config_text(self) -> str:
        return _short(self.config.label(), 80)

    def _figures(self) -> tuple[str, str]:
        """(gain over the default, cost) of a cached entry, as shown; empty strings otherwise."""
        entry = self.entry if self.source == "cache" else None
        cost = getattr(entry, "cost", None)
        if cost is None:
            return "", ""
        default = getattr(entry, "default_cost", None)
        gain = "" if default is None or cost <= 0 else f"{default / cost:.3g}×"
        return gain, f"{cost:.4g} s"


def failed_lookup(key: str, what: str, exc: Exception, signature: str = "?") -> Lookup:
    """The default config's `Lookup` after a failure of autotune's on function ``key`` (it
    could not do ``what``), and its one warning."""
    warn_user_once(
        ("failed", key, type(exc).__name__),
        f"autotune: @at.autotuned could not {what} for {key} ({type(exc).__name__}: {exc}); it runs "
        "its default config, exactly as jax.jit would. This is a bug of autotune: please report it.",
    )
    return Lookup(Config(), "default (error)", None, "?", signature, "?", f"{type(exc).__name__}: {exc}")


def _short(text: str, limit: int = 120) -> str:
    """``text`` on one line, cut to ``limit`` characters."""
    line = " ".join(str(text).split())
    return line if len(line) <= limit else line[: limit - 1] + "…"


def _import_call_path() -> None:
    with _IMPORTING:
        try:
            from autotune import select as _select  # noqa: F401
            from autotune.cache import _fastread  # noqa: F401
            from autotune.program import _compat_source, _rewrite, _sites  # noqa: F401

            _compat_source.warm()  # a loop's source is named on the first call: its folders, found now
        except Exception:  # noqa: BLE001 - the first call imports what it needs itself, and reports
            pass


_prefetch_started = threading.Event()
# Held while the prefetch thread imports. The caller's thread takes it before importing the same
# modules itself: two threads importing one package's modules at once can meet a partially
# initialised module ("cannot import name ... from partially initialized module").
_IMPORTING = threading.Lock()


def prefetch() -> None:
    """Start importing the first call's modules on a background thread (once per process)."""
    if not _prefetch_started.is_set():
        _prefetch_started.set()
        threading.Thread(target=_import_call_path, name="autotune-prefetch", daemon=True).start()


def after_prefetch() -> None:
    """Wait until a prefetch under way has finished importing (at once when none is)."""
    with _IMPORTING:
        pass


class Lookups:
    """How one decorated function's call signatures find their config: its cache's one read path
    (`autotune.cache._fastread.Reader`, opened on first use) and a lookup that never raises.

    Arguments:
        target: the decorated function, as the decorator was told it.
        objective: ``() -> Objective``, the objective it looks up for, whole (read per lookup: its
            compilation cache may be detected when used).
    """

    def __init__(self, target: Target, objective: Callable[[], Objective]):
        self.target, self._objective = target, objective
        self._reader: Reader | None = None

    @property
    def reader(self) -> Reader:
        """The cache's read path (the modules a prefetch is importing are waited for first)."""
        if self._reader is None:
            after_prefetch()
            from autotune.cache._fastread import Reader

            self._reader = Reader(self.target.cache)
        return self._reader

    def lookup(self, program: Any, signature: str) -> Lookup:
        """The config for this program and signature; every failure of ours is the default
        config and a warning (a cache problem names the cache, anything else the function)."""
        try:
            return read_config(self.reader, self.target, self._objective(), program, signature)
        except Exception as exc:
            return failed_lookup(self.target.key, "fingerprint it and look its config up", exc, signature)

    def config_for(self, args: tuple, kwargs: dict) -> Lookup:
        """The config a call with these arguments gets (its program traced as ``jax.jit`` would)."""
        target = self.target
        program, signature = _keys.program_key(target.fun, args, kwargs, target.jit_options())
        return self.lookup(program, signature)


def read_config(reader: Reader, target: Target, objective: Objective, program: Any, signature: str) -> Lookup:
    """The config ``target`` applies to ``program`` with ``signature``, read through ``reader``
    (the cache's read path, `autotune.cache._fastread.Reader`) and re-picked for ``objective``.

    A cache that cannot be read, or an entry that does not fit the program, is the default
    config and one warning naming the cache; an entry measured for other call counts than
    ``objective.expected_calls`` is applied with one warning that says how to re-tune.

    Raises:
        Exception: only what fingerprinting ``program`` raises (the caller warns).
    """
    after_prefetch()
    fingerprint = program.fingerprint
    try:
        info = _keys.device_info()
    except Exception as exc:  # no backend: jit itself will say so
        return Lookup(Config(), "default (cache error)", None, fingerprint, signature, "?", str(exc))
    objective = objective.on_device(info.get("bytes_limit"))  # a budget's fraction, in bytes (else ConfigError)
    device_key = _keys.device_key(_keys.under_budget(info, objective.budget_bytes))  # an entry of this budget
    key = target.key
    try:
        # Tuned for another call count or weights: the lookup re-picks with the one rule.
        entry = reader.lookup(key, fingerprint, signature, device_key, objective=objective)
        if entry is None:
            if target.on_miss == "warn":
                warn_user_once(
                    ("miss", key, signature),
                    f"autotune: no tuned config for {key} with signature {signature} on "
                    f"{device_key}; running the default config. Tune it with "
                    f"`{target.name}.tune(*args)` or `autotune tune FILE`.",
                )
            return Lookup(Config(), "default", None, fingerprint, signature, device_key)
        config = Config.from_dict(entry.config)
        # Validate against this program: a foreign or hand-edited entry must not break the call.
        from autotune.program._rewrite import Plan

        Plan(program.sites, config)
    except Exception as exc:
        where = reader.display_location
        warn_user_once(
            ("cache-error", where, type(exc).__name__),
            f"autotune: the tuning cache {where} could not be used ({type(exc).__name__}: {exc}); "
            f"{key} runs its default config. Fix or remove the cache, or pass cache= another location.",
        )
        return Lookup(Config(), "default (cache error)", None, fingerprint, signature, device_key, str(exc))
    calls = objective.expected_calls
    if not entry.covers(calls):
        from autotune import _display

        covered = _display.range_text(entry.covered_range)
        from autotune.cache._entry import fill_retune
        from autotune.cache._store import python_retune

        command = fill_retune(entry.retune or python_retune(target.name), calls)
        warn_user_once(
            ("range", key, signature, calls),
            f"autotune: {key} was measured completely only for {covered} "
            f"calls, and expected_calls={calls:g} lies outside, so configs that were not measured for that "
            f"many calls could be cheaper; it runs the best measured one ({config}). "
            f"Re-tune for {calls:g} calls: {command}",
        )
    return Lookup(config, "cache", entry, fingerprint, signature, device_key)
