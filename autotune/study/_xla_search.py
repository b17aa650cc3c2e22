"""Whether a study searches XLA's compile options, and over which choices (``TuneOptions.xla``).

``True``/``False`` say so; ``"auto"`` keeps what the study decided before, else decides on the
default's measured compile share (:func:`autotune.program._xla.searched`, the rule and its threshold).
"""

from __future__ import annotations

import statistics
from collections.abc import Callable
from typing import Any

from autotune._options import TuneOptions
from autotune.program._config import Config
from autotune.program._xla import XlaChoice, choices, gpu_platform, offered, searched
from autotune.select import Point
from autotune.select._objective import Objective
from autotune.study._optuna import Study
from autotune.study._search import REFERENCE_ROUNDS


def xla_dimension(
    options: TuneOptions, goal: Objective, device: dict[str, Any], study: Study, measure_default: Callable[[], Any]
) -> tuple[tuple[XlaChoice, ...], list[Any]]:
    """(the XLA choices a study searches, the measurements of the default taken to decide it).

    ``options.xla`` True/False say so; ``"auto"`` (:func:`autotune.program._xla.searched`) keeps what the
    study decided before (a resumed study, a ``--workers`` helper), else on the CPU measures the
    default (``measure_default``; the search reuses these as the default's first reference
    samples) and searches the options where its compile dominates its cost. One sample decides
    "no"; a "yes" is taken again on the medians of ``REFERENCE_ROUNDS`` samples, since a moment of
    load can make one small compile look several times its size (enough to lift a small loop over
    ``AUTO_MIN_COMPILE_S``) and a study keeps its decision for good. The choices are the default and each
    option this jaxlib accepts on the device; ``()`` when not searched."""
    held, measured = study.attrs.get("xla_searched"), []
    if options.xla == "auto" and held is not None:
        on = bool(held)
    elif options.xla == "auto" and not gpu_platform(device["platform"]):
        on = False
        while len(measured) < REFERENCE_ROUNDS and (on or not measured):
            try:
                measured.append(measure_default())
            except Exception:  # whatever it is, the search meets it again as trial 0 and reports it there
                break
            on = searched(options.xla, goal, _median_point(measured), device["platform"])
    else:
        on = searched(options.xla, goal, None, device["platform"])
    study.set_attrs(xla_searched=on)
    if not on:
        return (), measured
    return choices(offered(device["platform"], device["device_kind"])[0]), measured


def _median_point(measured: list[Any]) -> Point:
    """The default's point from its samples (medians), charging the load as the objective does
    (estimated where not measured)."""
    m = sorted(measured, key=lambda x: x.compile_cost_s)[len(measured) // 2]
    compile_cost_s = statistics.median(x.compile_cost_s for x in measured)
    run_cost_s = statistics.median(x.run_cost_s for x in measured)
    return Point(Config(), compile_cost_s, run_cost_s, measurement=m)
