"""``fn.tune``: an ``@at.autotuned`` function tuned on example arguments, its winner stored.

The options are built once here (:class:`autotune.TuneOptions`) from the keywords of
``fn.tune`` (a keyword that is neither an option nor a parameter of the function is an
error naming the nearest option); ``autotune tune`` builds them itself and comes in through
:func:`tune_with`, with its :class:`~autotune._options.Plumbing`. The study (Optuna) and
the cache writer load only when a function is tuned.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any

from autotune._errors import warn_user_once
from autotune._options import Plumbing, TuneOptions, split_keywords
from autotune.select._objective import Objective

if TYPE_CHECKING:
    from autotune.jit._decorator import Autotuned
    from autotune.study import TuneResult

_FN_TUNE = ("n_trials", "timeout", "sampler", "storage", "study_name")  # fn.tune's named options


def options_of(ctl: Autotuned, api: str, keywords: dict[str, Any]) -> tuple[TuneOptions, dict[str, Any]]:
    """(the :class:`TuneOptions` of ``keywords``, the function's own keyword arguments)."""
    chosen, kwargs = split_keywords(api, ctl.fun, keywords)
    return TuneOptions(**chosen), kwargs


def tune_with(
    ctl: Autotuned, args: tuple, kwargs: dict[str, Any], options: TuneOptions, plumbing: Plumbing | None = None
) -> TuneResult | None:
    """Tune the `Autotuned` ``ctl`` on ``args``/``kwargs`` with ``options`` as given; store the
    winner (unless ``plumbing.store`` is False) under :func:`autotune.cache._store.store`'s rule."""
    from autotune.cache._store import python_retune, store
    from autotune.study._tune import run

    plumbing = plumbing or Plumbing()
    if plumbing.retune is None:
        plumbing = plumbing.replace(retune=python_retune(ctl.__name__))
    result = run(
        ctl.fun,
        args,
        kwargs,
        objective_of(ctl),
        options,
        function_key=ctl.key,
        jit_kwargs=ctl.jit_kwargs,
        plumbing=plumbing,
        storage_default=None if ctl.cache_arg is None else storage_beside(ctl.cache_arg),
    )
    if result is not None and plumbing.store:
        result.stored = store(ctl.cache, result, ctl.key, plumbing.retune)
        if result.stored == "written":
            ctl.clear_cache()
    return result


def objective_of(ctl: Autotuned) -> Objective:
    """The objective an `Autotuned` tunes and looks up for, whole (:attr:`Autotuned.objective`)."""
    return ctl.objective


def storage_beside(cache_arg: Any) -> str:
    """The default study storage of a function with ``cache=``: ``studies.db`` beside it."""
    from autotune._paths import default_storage_url

    return default_storage_url(os.fspath(getattr(cache_arg, "url", cache_arg)))


def tune_after_miss(ctl: Autotuned, args: tuple, kwargs: dict[str, Any]) -> None:
    """``on_miss="tune"``: tune briefly after the first call; a failure is one warning."""
    if ctl.jit_kwargs.get("donate_argnums") or ctl.jit_kwargs.get("donate_argnames"):
        warn_user_once(
            ("donate-tune", ctl.key),
            f"autotune: on_miss='tune' cannot tune {ctl.key} on donated arguments; "
            f"call {ctl.__name__}.tune(*args) with fresh inputs instead.",
        )
        return
    try:
        tune_with(ctl, args, kwargs, TuneOptions(n_trials=8))
    except Exception as exc:
        warn_user_once(
            ("tune-error", ctl.key, type(exc).__name__),
            f"autotune: on_miss='tune' could not tune {ctl.key} ({type(exc).__name__}: {exc}); "
            "it keeps running its default config.",
        )
