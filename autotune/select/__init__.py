"""Selection: the one home of every rule that names a winner.

Each config is a :class:`Point` (``config``, ``compile_cost_s``, ``run_cost_s``, ``rounds``):
its median seconds, and (when it was re-measured) the per-round samples, paired by
index with the default's rounds. ``compile_cost_s`` is the one-off seconds the objective charges,
``Measurement.compile_cost_s`` (the CPU seconds of trace + lower + compile); the rounds of
confirmed points were all taken side by side in confirmation (``study/_confirm.py``). Under an objective a round costs
``compile_weight * c + runtime_weight * N * r`` (:meth:`Objective.line`), a line in the call count N; a point's
cost is the median of its round costs. The rules, in plain Python::

    def winner(points, default, N):
        d = the default's point
        beats = [p for p in points if p is not d
                 and cost(p, N) < cost(d, N)                       # a lower median
                 and sum(round_cost(p, i, N) < round_cost(d, i, N)  # and enough paired rounds
                         for i in paired_rounds(p, d)) >= wins_needed(len(paired_rounds(p, d)))]
        return min(beats, key=cost) if beats else d

A challenger must beat the default on the median *and* in enough of the rounds measured
side by side (drift on a shared machine hits both members of a pair alike): so many that a
challenger exactly as good as the default would win them at most 1 time in 8 by chance (a
one-sided sign test: 3 of 3 rounds, 5 of 6, 7 of 9; all of 1 or 2). A strict majority
would let a coin pick the winner half of the time between two equal configs. A point
without rounds is compared on its cost alone. At a call count where two costs are equal, the config that
is cheaper just above it wins (so ``winner`` agrees with the half-open intervals of
:func:`crossover_intervals`); remaining ties go to the smaller canonical config JSON.

Everything a user sees (the tuned winner, its cost, the re-pick for another
``expected_calls``, the ★ in tables, the report's "chosen", the crossover intervals and
the range over which a study's measurements are complete) comes from this module.
Only the standard library is needed.
"""

from autotune.select._budget import feasible as feasible
from autotune.select._budget import fits as fits
from autotune.select._budget import within as within
from autotune.select._complete import complete_range as complete_range
from autotune.select._front import best_at as best_at
from autotune.select._front import crossover_intervals as crossover_intervals
from autotune.select._front import pareto_front as pareto_front
from autotune.select._point import Point as Point
from autotune.select._point import as_points as as_points
from autotune.select._point import point_of as point_of
from autotune.select._range import format_calls as format_calls
from autotune.select._range import in_range as in_range
from autotune.select._range import intervals_json as intervals_json
from autotune.select._range import json_bound as json_bound
from autotune.select._range import range_json as range_json
from autotune.select._rule import Choice as Choice
from autotune.select._rule import beats as beats
from autotune.select._rule import choose as choose
from autotune.select._rule import cost as cost
from autotune.select._rule import ranked as ranked
from autotune.select._rule import round_costs as round_costs
from autotune.select._rule import tiered_cost_of as tiered_cost_of
from autotune.select._rule import winner as winner
from autotune.select._rule import wins_needed as wins_needed
