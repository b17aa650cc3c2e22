"""`FakeRunner`: a `Runner` (autotune/measuring/_runner.py) whose measurements are canned, so a
test of a decision (the search, the guard, the compile budget, confirmation, the winner rule)
asserts the decision itself, with no clock behind it.

Each config (by its label, ``config.label()``: ``"l=scan×2"``, ``"l=for"``) costs what the test
says: ``(compile_s, run_s)``, where ``run_s`` is a number or a sequence taken in turn, one value per
sample of that config in the current process (the search's samples included; a renewed process
starts the sequence again). A callable ``costs(label, process)`` can make a config cost something
else in a second process (``renew``). ``noise`` multiplies each run sample by ``1 + noise * u``, ``u``
uniform in [-1, 1] from a generator seeded with ``seed``: deterministic, whatever the machine's load.

The compile figures are charged as CPU seconds (trace and lower 0), the outputs are the
function's real outputs (computed once, with ``jax.jit``) unless ``outputs`` changes them for a
config, and a config's lowered program is its label unless ``programs`` maps labels together.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

import numpy as np

from autotune.measuring._measurement import Measurement
from autotune.measuring._runner import TrialFailed
from autotune.program._config import Config

Spec = tuple[float, float | Sequence[float]]
DEFAULT_SPEC: Spec = (0.1, 1e-3)


class FakeRunner:
    """A runner of canned measurements (see the module docstring).

    Arguments:
        fn, args: the function and its arguments (its real outputs feed the correctness guard).
        costs: label -> ``(compile_s, run_s)`` (``"*"``: every other config; else
            :data:`DEFAULT_SPEC`), or a callable ``(label, process) -> (compile_s, run_s)``.
        noise, seed: relative uniform noise on every run sample, from a seeded generator.
        outputs: label -> a function of the real outputs giving this config's outputs.
        programs: label -> program hash (configs mapped to one hash lower to the same program).
        renewable: whether :meth:`renew` gives a fresh process (an in-process runner cannot).

    What it was asked is kept: ``measured`` and ``retimed`` (labels, in order), ``budgets`` (the
    compile budget of each ``measure``), ``renewed`` (how many fresh processes) and ``closed``.
    """

    isolated = True

    def __init__(
        self,
        fn: Callable,
        args: tuple,
        costs: Mapping[str, Spec] | Callable[[str, int], Spec] = (),
        *,
        noise: float = 0.0,
        seed: int = 0,
        outputs: Mapping[str, Callable[[Any], Any]] = (),
        programs: Mapping[str, str] = (),
        renewable: bool = True,
    ):
        import jax

        self.reference = jax.tree_util.tree_map(np.asarray, jax.jit(fn)(*args))
        self.costs = costs if callable(costs) else dict(costs)
        self.noise, self.rng = noise, random.Random(seed)
        self.outputs, self.programs = dict(outputs), dict(programs)
        self.renewable = renewable
        self.process = 0
        self.samples: dict[str, int] = {}  # samples taken of each label in this process
        self.kept: dict[str, Measurement] = {}  # this process's compiled executables, for retime
        self.measured: list[str] = []
        self.retimed: list[str] = []
        self.budgets: list[float | None] = []
        self.renewed = 0
        self.closed = False

    # -- the canned figures ---------------------------------------------------------------
    def spec(self, label: str) -> Spec:
        if callable(self.costs):
            return self.costs(label, self.process)
        return self.costs.get(label, self.costs.get("*", DEFAULT_SPEC))

    def _run_s(self, label: str) -> float:
        runs = self.spec(label)[1]
        i = self.samples.get(label, 0)
        self.samples[label] = i + 1
        run_s = float(runs[i % len(runs)]) if isinstance(runs, Sequence) else float(runs)
        return run_s * (1.0 + self.noise * self.rng.uniform(-1.0, 1.0)) if self.noise else run_s

    def _figures(self, config: Config, label: str, run_s: float) -> Measurement:
        compile_s = float(self.spec(label)[0])
        return Measurement(
            trace_s=0.0,
            lower_s=0.0,
            compile_s=compile_s,
            run_s=run_s,
            run_iqr_s=0.0,
            reps=10,
            config=config,
            program_hash=self.programs.get(label, label),
            trace_cpu_s=0.0,
            lower_cpu_s=0.0,
            compile_cpu_s=compile_s,
            run_p10_s=run_s,
        )

    # -- the Runner contract --------------------------------------------------------------
    def measure(
        self,
        config: Config | dict | None,
        *,
        compile_budget_s: float | None = None,
        on_lowered: Callable[[str], Measurement | None] | None = None,
    ) -> Measurement:
        config = Config.from_dict(config)
        label = config.label()
        self.measured.append(label)
        self.budgets.append(compile_budget_s)
        program = self.programs.get(label, label)
        if on_lowered is not None:
            earlier = on_lowered(program)
            if earlier is not None:  # the same program as an earlier config: its figures, not compiled
                return earlier.replace(config=config, trace_s=0.0, lower_s=0.0, trace_cpu_s=0.0, lower_cpu_s=0.0)
        compile_s = float(self.spec(label)[0])
        if compile_budget_s is not None and compile_s >= compile_budget_s:
            raise TrialFailed(
                "pruned",
                f"compile {compile_s:g} s over the budget {compile_budget_s:g} s",
                compile_s_at_least=compile_s,
            )
        m = self._figures(config, label, self._run_s(label))
        self.kept[label] = m
        change = self.outputs.get(label)
        return m.replace(outputs=self.reference if change is None else change(self.reference))

    def retime(self, config: Config | dict | None) -> Measurement | None:
        config = Config.from_dict(config)
        label = config.label()
        self.retimed.append(label)
        kept = self.kept.get(label)
        if kept is None:
            return None
        run_s = self._run_s(label)
        return kept.replace(run_s=run_s, run_p10_s=run_s)

    def retain(self, configs: Iterable[Config | dict]) -> None:
        keep = {Config.from_dict(c).label() for c in configs}  # as the real store: only these stay kept
        self.kept = {k: v for k, v in self.kept.items() if k in keep}

    def renew(self) -> bool:
        if not self.renewable:
            return False
        self.process += 1
        self.renewed += 1
        self.samples.clear()
        self.kept.clear()
        return True

    def close(self) -> None:
        self.closed = True
