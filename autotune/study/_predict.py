"""Predict a config's compile time before compiling it.

Compile time grows with the program XLA sees, and a loop's share of the program is its
body times the copies of it the config emits (``scan(unroll=k)`` over L steps: k + L mod k
copies; a full unroll: L; nested loops multiply). From the trials measured so far we fit

    compile_cost_s ~= a + sum(b_site * copies_site)        (a, b >= 0, least squares)

and skip a config whose *predicted* compile time is at least :data:`MARGIN` times the
compile budget: it would be pruned anyway, and skipping saves compiling it. The margin is
conservative on purpose (XLA's compile time grows faster than linearly with program size,
so a linear fit under-predicts large programs): only a config predicted at twice the
budget is skipped, and the fit must explain the trials it was made from (every
measured point within :data:`FIT_TOLERANCE` of the fit) before it is used at all. A
skipped config is recorded as ``pruned`` with its prediction as the reason, and
``prediction / MARGIN`` as the lower bound on its compile time that the honest range
of :func:`autotune.select.complete_range` uses.

**One fit per XLA option set.** XLA's options scale the whole compile (``xla:O0`` and ``xla:O1``
shorten it, by how much depends on the program: docs/results/xla.md#findings), so trials under
different option sets are never fitted together: a config is predicted from the trials that
share its :attr:`Config.xla` only, and a set with too few of them is not predicted (never skipped).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from autotune.program._config import Config, SiteChoice

MARGIN = 2.0
"""Skip only when the predicted compile time is at least this multiple of the budget."""

FIT_TOLERANCE = 0.35
"""The fit is used only while every measured point is within this relative error of it."""


def body_copies(site: Any, choice: SiteChoice) -> int:
    """Copies of a site's body in the emitted program (before multiplying by enclosing sites)."""
    length = site.length
    if not isinstance(length, int) or length <= 0:  # while loops: the guarded copies
        return max(1, int(getattr(choice, "unroll", 1) or 1))
    if choice.repr == "for":
        return length
    k = max(1, min(int(choice.unroll), length))
    return length if k >= length else k + length % k


def copies(space, config: Config) -> dict[str, float]:
    """Body copies per site of ``config``, multiplied along the nesting."""
    own_copies = getattr(space, "copies", None)
    if callable(own_copies):
        return {k: float(v) for k, v in own_copies(config).items()}
    by_id = {e.site.id: e.site for e in space.entries}
    own = {sid: body_copies(site, config.get(sid, site.default)) for sid, site in by_id.items()}

    def total(sid: str) -> float:
        site = by_id[sid]
        parent = site.parent
        while parent is not None and parent not in by_id:  # an untunable parent (length <= 1)
            parent = None
        return own[sid] * (total(parent) if parent is not None else 1)

    return {sid: float(total(sid)) for sid in by_id}


def _nnls(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Least squares with non-negative coefficients, by dropping the most negative one until none is."""
    active = list(range(x.shape[1]))
    coef = np.zeros(x.shape[1])
    while active:
        sol, *_ = np.linalg.lstsq(x[:, active], y, rcond=None)
        if (sol >= 0).all():
            coef[active] = sol
            return coef
        active.pop(int(np.argmin(sol)))
    return coef


class CompilePredictor:
    """The fit above, refreshed as trials are measured."""

    def __init__(self, space):
        self.space = space
        self.ids = [e.site.id for e in space.entries]
        self.rows: dict[Any, list[list[float]]] = {}  # per XLA option set: [1, copies...]
        self.y: dict[Any, list[float]] = {}
        self._coef: dict[Any, np.ndarray | None] = {}

    def observe(self, config: Config, compile_cost_s: float) -> None:
        c = copies(self.space, config)
        self.rows.setdefault(config.xla, []).append([1.0] + [c[i] for i in self.ids])
        self.y.setdefault(config.xla, []).append(float(compile_cost_s))
        self._coef.pop(config.xla, None)

    def _fit(self, xla: Any) -> np.ndarray | None:
        if xla in self._coef:
            return self._coef[xla]
        n, k = len(self.y.get(xla, ())), len(self.ids) + 1
        if n < max(4, k + 1):
            return None
        x, y = np.array(self.rows[xla]), np.array(self.y[xla])
        coef = None
        if np.linalg.matrix_rank(x) >= min(k, n):
            fit = _nnls(x, y)
            if (np.abs(x @ fit - y) / np.maximum(y, 1e-9)).max() <= FIT_TOLERANCE:
                coef = fit
        self._coef[xla] = coef
        return coef

    def trials(self, config: Config) -> int:
        """How many measured trials the fit for ``config``'s XLA options is made from."""
        return len(self.y.get(config.xla, ()))

    def predict(self, config: Config) -> float | None:
        """Predicted trace + lower + compile seconds, or None while the fit for its XLA options is
        not trustworthy (or has too few trials)."""
        coef = self._fit(config.xla)
        if coef is None:
            return None
        c = copies(self.space, config)
        return float(coef @ np.array([1.0] + [c[i] for i in self.ids]))

    def over_budget(self, config: Config, budget: float | None) -> float | None:
        """The prediction when it is at least MARGIN x the budget (skip the config), else None."""
        if budget is None:
            return None
        predicted = self.predict(config)
        return predicted if predicted is not None and predicted >= MARGIN * budget else None
