"""``fn.tune``: a decorated function tuned on example arguments, its winner stored.

The options are built once here (:class:`autotune.TuneOptions`) from the keywords of
``fn.tune`` (a keyword that is neither an option nor a parameter of the function is an
error naming the nearest option); ``autotune tune`` builds them itself and comes in through
:func:`tune_with`, with its :class:`~autotune._options.Plumbing`. The study (Optuna) and
the cache writer load only when a function is tuned. Everything here takes the decorated
function as a `Target` and an objective: never the decorator itself.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from autotune._errors import warn_user_once
from autotune._options import Plumbing, TuneOptions, split_keywords
from autotune.jit._target import Target
from autotune.select._objective import Objective

if TYPE_CHECKING:
    from autotune.study import TuneResult

FN_TUNE = ("n_trials", "timeout", "sampler", "storage", "study_name")
"""``fn.tune``'s named options (the rest are :class:`TuneOptions` fields, as keywords)."""


def options_of(fun: Callable, api: str, keywords: dict[str, Any]) -> tuple[TuneOptions, dict[str, Any]]:
    """(the :class:`TuneOptions` of ``keywords``, the function ``fun``'s own keyword arguments)."""
    chosen, kwargs = split_keywords(api, fun, keywords)
    return TuneOptions(**chosen), kwargs


def tune_with(
    target: Target,
    objective: Objective,
    cache: Callable[[], Any],
    call: tuple[tuple, dict[str, Any]],
    options: TuneOptions,
    plumbing: Plumbing | None = None,
) -> TuneResult | None:
    """Tune ``target`` on the example ``call`` (``(args, kwargs)``) for ``objective`` with
    ``options``; store the winner in ``cache()`` (the `Cache` it opens; unless ``plumbing.store`` is
    False) under :func:`autotune.cache._store.store`'s rule. ``result.stored`` says what the
    cache did (``"written"``: the caller forgets its compiled versions)."""
    from autotune.cache._store import python_retune, store
    from autotune.study._tune import run

    plumbing = plumbing or Plumbing()
    if plumbing.retune is None:
        plumbing = plumbing.replace(retune=python_retune(target.name))
    if plumbing.neighbours_of is None and options.neighbours:
        plumbing = plumbing.replace(neighbours_of=neighbours_in(cache, target.key))
    args, kwargs = call
    result = run(
        target.fun,
        tuple(args),
        dict(kwargs),
        objective,
        options,
        function_key=target.key,
        jit_kwargs=target.jit_options(),
        plumbing=plumbing,
        storage_default=None if target.cache is None else storage_beside(target.cache),
    )
    if result is not None and plumbing.store:
        result.stored = store(cache(), result, target.key, plumbing.retune)
    return result


def neighbours_in(cache: Callable[[], Any], key: str) -> Callable[[str, str, str], list]:
    """What ``cache()`` holds for the function ``key`` at other keys on a device, as the study's
    :class:`autotune.study._neighbours.Neighbour` values (``Plumbing.neighbours``): called with the
    new study's fingerprint, signature and device key. A cache that cannot be read seeds nothing
    (one warning): the study then starts as if it held nothing."""

    def found(fingerprint: str, signature: str, device_key: str) -> list:
        from autotune._errors import CacheError
        from autotune.program._config import Config
        from autotune.study._neighbours import Neighbour

        try:
            entries = cache().neighbours(key, device_key, fingerprint=fingerprint, signature=signature)
        except CacheError as exc:
            warn_user_once(
                ("neighbours", key),
                f"autotune: could not read the cache's configs of {key} at other input signatures ({exc}); "
                "the study starts without them.",
            )
            return []
        return [
            Neighbour(
                e.signature,
                e.fingerprint,
                tuple(e.points),
                None if e.default_config is None else Config.from_dict(e.default_config),
            )
            for e in entries
        ]

    return found


def storage_beside(cache_arg: Any) -> str:
    """The default study storage of a function with ``cache=``: ``studies.db`` beside it."""
    from autotune._paths import default_storage_url

    return default_storage_url(os.fspath(getattr(cache_arg, "url", cache_arg)))


def tune_after_miss(target: Target, tune: Callable[[TuneOptions], Any]) -> None:
    """``on_miss="tune"``: tune briefly after the first call (``tune(options)`` runs it on that
    call's arguments); a failure is one warning, never an exception."""
    if target.donating:
        warn_user_once(
            ("donate-tune", target.key),
            f"autotune: on_miss='tune' cannot tune {target.key} on donated arguments; "
            f"call {target.name}.tune(*args) with fresh inputs instead.",
        )
        return
    try:
        tune(TuneOptions(n_trials=8))
    except Exception as exc:
        warn_user_once(
            ("tune-error", target.key, type(exc).__name__),
            f"autotune: on_miss='tune' could not tune {target.key} ({type(exc).__name__}: {exc}); "
            "it keeps running its default config.",
        )
