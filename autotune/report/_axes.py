"""Shared pieces of the report's figures: a figure without pyplot state, time units,
padding, and the marker and colour of each trial outcome."""

from __future__ import annotations

from collections.abc import Sequence

from autotune.measuring._runner import Outcome
from autotune.report._data import WAITING_STATES

_STYLE = {  # marker, colour of each trial outcome
    Outcome.COMPLETE: ("o", "#1f77b4"),
    Outcome.SHARED: ("o", "#17becf"),
    Outcome.DUPLICATE: (".", "#9e9e9e"),
    Outcome.REJECTED: ("X", "#d62728"),
    Outcome.PRUNED: ("s", "#9467bd"),
    Outcome.TIMEOUT: ("v", "#ff7f0e"),
    Outcome.CRASHED: ("D", "#8c564b"),
    Outcome.OOM: ("P", "#8c564b"),
    Outcome.ERROR: ("x", "#d62728"),
    Outcome.INTERRUPTED: ("|", "#7f7f7f"),
    Outcome.ABANDONED: ("|", "#7f7f7f"),
}

OUTCOME_STYLE = {o.value: _STYLE[o] for o in Outcome} | dict(zip(WAITING_STATES, (("|", "#bcbd22"), ("|", "#c7c7c7"))))
"""Marker and colour of every :class:`autotune.Outcome`, and of trials still running or waiting."""
LEGEND_CHARS = 64
"""Legend entries are wrapped at word boundaries to this many characters a line."""
REASON_CHARS = 112
"""Trial reasons under the history figure: at most this many characters a line, two lines each."""


def time_unit(values: Sequence[float]) -> tuple[float, str]:
    """Scale and unit name so that the largest value reads well."""
    top = max((abs(v) for v in values if v is not None), default=1.0)
    if top < 1e-3:
        return 1e6, "µs"
    if top < 1.0:
        return 1e3, "ms"
    return 1.0, "s"


def wants_log(values: Sequence[float], ratio: float = 20.0) -> bool:
    vals = [v for v in values if v is not None and v > 0]
    return bool(vals) and max(vals) / min(vals) > ratio


def new_figure(width: float, height: float):
    from matplotlib.figure import Figure

    fig = Figure(figsize=(width, height), dpi=110, layout="constrained")
    return fig


def empty(ax, text: str) -> None:
    ax.text(0.5, 0.5, text, ha="center", va="center", transform=ax.transAxes, color="#666666")
    ax.set_xticks([])
    ax.set_yticks([])


def padded(values: Sequence[float], log: bool) -> tuple[float, float]:
    lo, hi = min(values), max(values)
    if log:
        return lo / 1.25, hi * 1.25
    pad = (hi - lo) * 0.08 or abs(hi) * 0.1 or 1.0
    return max(0.0, lo - pad) if lo >= 0 else lo - pad, hi + pad


def _in_view(ax, xs, ys) -> bool:
    import numpy as np

    (x0, x1), (y0, y1) = sorted(ax.get_xlim()), sorted(ax.get_ylim())
    xs, ys = np.broadcast_arrays(np.asarray(xs, dtype=float), np.asarray(ys, dtype=float))
    inside = (xs >= x0) & (xs <= x1) & (ys >= y0) & (ys <= y1)
    return bool(np.any(inside & np.isfinite(xs) & np.isfinite(ys)))


def drawn(ax, artist) -> bool:
    """Whether ``artist`` puts anything inside ``ax``'s view: a line of two points or a marker,
    a scatter point, a horizontal or vertical rule (data in axes coordinates count as inside)."""
    from matplotlib.collections import PathCollection
    from matplotlib.lines import Line2D

    if not artist.get_visible():
        return False
    if isinstance(artist, PathCollection):
        offsets = artist.get_offsets()
        return len(offsets) > 0 and _in_view(ax, offsets[:, 0], offsets[:, 1])
    if isinstance(artist, Line2D):
        xs, ys = artist.get_xdata(orig=False), artist.get_ydata(orig=False)
        if artist.get_transform() != ax.transData:  # axhline / axvline: one coordinate is the axes'
            blended = artist.get_transform()
            if blended.contains_branch_seperately(ax.transData) == (True, False):
                return _in_view(ax, xs, [sum(ax.get_ylim()) / 2] * len(xs))
            if blended.contains_branch_seperately(ax.transData) == (False, True):
                return _in_view(ax, [sum(ax.get_xlim()) / 2] * len(ys), ys)
        marker = artist.get_marker() not in (None, "None", "", " ")
        return (len(xs) >= 2 or (marker and len(xs) >= 1)) and _in_view(ax, xs, ys)
    return True


def legend(ax, **kwargs):
    """``ax.legend`` of the labelled artists that are really drawn (inside the final limits),
    so an entry never names something the reader cannot find; None when nothing is left."""
    handles, labels = ax.get_legend_handles_labels()
    kept = [(h, lab) for h, lab in zip(handles, labels) if drawn(ax, h)]
    if not kept:
        return None
    box = ax.legend([h for h, _ in kept], [lab for _, lab in kept], **kwargs)
    for handle in box.legend_handles:  # a marker drawn large (a frame around another) stays a symbol
        if hasattr(handle, "get_sizes") and len(handle.get_sizes()) and handle.get_sizes()[0] > 200:
            handle.set_sizes([200])
    return box
