"""Turning a tune result into a cache entry, and the rule "store only improvements".

``fn.tune`` stores its result through :func:`store`: the entry (:func:`entry_from_result`)
is written unless the cache's entry from the same study stands (:func:`entry_stands`).
The re-tune command an entry carries is built here too (:func:`python_retune`,
:func:`command_retune`) and filled in by :func:`autotune.cache._entry.fill_retune`.
No SQLAlchemy here: the `Cache` passed in does the writing.
"""

from __future__ import annotations

import shlex
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from autotune import select as _select
from autotune.cache._entry import CacheEntry
from autotune.cache._entry_fields import stored_point
from autotune.program._config import Config

if TYPE_CHECKING:
    from autotune.study import TuneResult

CALLS = "{calls}"  # where a re-tune command takes the call count


def python_retune(name: str) -> str:
    """The re-tune command of a function tuned from Python, ``{calls}`` for the call count."""
    return f"{name}.with_options(expected_calls={CALLS}).tune(*args)"


def command_retune(argv: Sequence[str]) -> str:
    """The re-tune command ``autotune ARGV --expected-calls {calls}`` (quoted for a shell)."""
    return "autotune " + shlex.join(argv) + f" --expected-calls {CALLS}"


def entry_from_result(result: TuneResult, function_key: str, retune: str | None = None) -> CacheEntry:
    """The cache entry that records ``result``: the winner, and every confirmed point with
    its rounds, so another call count is re-picked by the same rule."""
    best = result.best
    measurements = {
        "trace_s": best.trace_s,
        "lower_s": best.lower_s,
        "compile_s": best.compile_s,
        "run_s": best.run_s,
        "run_iqr_s": best.run_iqr_s,
        "reps": best.reps,
    }
    measurements.update({f"memory_{k}_bytes": v for k, v in best.memory.items()})
    if best.memory_bytes is not None:  # THE device memory figure (`device_memory`), what a budget holds
        measurements["memory_bytes"] = best.memory_bytes
    if best.flops is not None:
        measurements["flops"] = best.flops
    return CacheEntry(
        function_key=function_key,
        fingerprint=result.fingerprint,
        signature=result.signature,
        device=dict(result.device),
        config=result.best_config.to_dict(),
        sites={
            s.id: {
                "kind": s.kind,
                "length": s.length,
                "has_ys": s.has_ys,
                **({"derived": True} if s.derived else {}),
                **({"policy": s.policy} if s.policy is not None else {}),
            }
            for s in result.sites
        },  # derived: `best` marks the loop JAX derived (grad's backward scan) as `sites` and `tune` do;
        # policy: a checkpointed body's own, which lets the entry's config give it another
        measurements=measurements,
        objective=result.objective.to_dict(),
        cost=result.best_cost,
        default_cost=result.default_cost,
        study_name=result.study_name,
        pareto=[stored_point(p) for p in result.confirmed],
        default_config=result.default_config.to_dict(),
        complete_range=_select.range_json(result.complete_range),
        retune=retune,
    )


def entry_stands(current: CacheEntry | None, entry: CacheEntry, result: TuneResult) -> bool:
    """Whether the cache's ``current`` entry stands against ``entry``, written from ``result``.

    Only an entry from the same study and objective can stand. It does when the study was
    finished (nothing measured: the entry already records this study); when the winner is
    its config and no new trial was measured (a re-confirmation that only re-timed it); and
    when its config was re-timed in this confirmation and the new winner does not beat it
    there under the winner rule (median and paired rounds, with the stored config as the one
    to beat). Figures of two confirmations are never set against each other.
    """
    if current is None or current.study_name != entry.study_name or current.objective != entry.objective:
        return False
    stored, new = Config.from_dict(current.config), Config.from_dict(entry.config)
    if result.finished or (stored == new and not result.new_trials):
        return True
    if stored == new:
        return False
    old, won = _select.point_of(result.confirmed, stored), _select.point_of(result.confirmed, new)
    if old is None or won is None or old is won:  # not re-timed, or the same program under another name
        return False
    return not _select.beats(won, old, result.objective)


def store(cache: Any, result: TuneResult, function_key: str, retune: str | None = None) -> str:
    """Write ``result``'s entry into ``cache`` unless the entry there stands
    (:func:`entry_stands`); returns ``"written"`` or ``"kept"``."""
    entry = entry_from_result(result, function_key, retune)
    current = cache.lookup(entry.function_key, entry.fingerprint, entry.signature, entry.device_key)
    if entry_stands(current, entry, result):
        return "kept"
    cache.put(entry)
    return "written"


__all__ = ["CALLS", "command_retune", "entry_from_result", "entry_stands", "python_retune", "store"]
