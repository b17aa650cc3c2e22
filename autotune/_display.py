"""What people see, the same in the CLI and the report: seconds with their unit, text
shortened or wrapped at word boundaries (never cut mid-word), and which configs a
by-call-count table lists.

The CLI's tables and the report's HTML and PNG figures all format through here, so a
reason or a time reads the same everywhere. Which config wins is never decided here:
that is :mod:`autotune._select`.
"""

from __future__ import annotations

import math
import textwrap
from collections.abc import Mapping, Sequence
from typing import Any

from . import _select

ELLIPSIS = "…"
_UNITS = ((1.0, "s"), (1e-3, "ms"), (1e-6, "µs"), (1e-9, "ns"))


def seconds(x: float | None, digits: int = 4) -> str:
    """A duration with its unit: ``0.452 s``, ``741.7 µs``, ``12.3 ms``; ``-`` for None.

    Example::

        >>> seconds(0.0007417), seconds(2.5), seconds(None)
        ('741.7 µs', '2.5 s', '-')
    """
    if x is None or not math.isfinite(x):
        return "-" if x is None else str(x)
    if x == 0:
        return "0 s"
    scale, unit = next(((s, u) for s, u in _UNITS if abs(x) >= s), _UNITS[-1])
    return f"{x / scale:.{digits}g} {unit}"


def cost(x: float | None, digits: int = 4) -> str:
    """A cost (weighted seconds) with its unit: ``1.194 s``; ``-`` for None."""
    return "-" if x is None else f"{x:.{digits}g} s"


def ratio(x: float | None) -> str:
    """``1.18×``; ``-`` for None or a non-finite ratio."""
    return "-" if x is None or not math.isfinite(x) else f"{x:.2f}×"


def one_line(text: str | None) -> str:
    """Every run of whitespace (newlines included) as one space."""
    return " ".join((text or "").split())


def _shorten_token(word: str, limit: int) -> str:
    """A single word longer than ``limit`` (a path, a URL): keep its tail after the last
    ``/`` when that fits, else its head, marked with an ellipsis."""
    if len(word) <= limit:
        return word
    tail = word.rstrip("/").rsplit("/", 1)[-1]
    if 0 < len(tail) < limit:
        return ELLIPSIS + "/" + tail if len(tail) + 2 <= limit else ELLIPSIS + tail
    return word[: max(1, limit - 1)] + ELLIPSIS


def shorten(text: str | None, limit: int, *, longest_word: int | None = None) -> str:
    """``text`` on one line, at most ``limit`` characters, cut only between words.

    Arguments:
        text: any text (None is empty).
        limit: the most characters of the result.
        longest_word: words longer than this (paths, URLs) are first shortened to
            their tail; default ``limit``.

    Example::

        >>> shorten("its compile alone could not beat the best cost", 30)
        'its compile alone could not …'
    """
    words = [_shorten_token(w, longest_word or limit) for w in one_line(text).split(" ") if w]
    line = " ".join(words)
    if len(line) <= limit:
        return line
    out = ""
    for w in words:
        candidate = f"{out} {w}" if out else w
        if len(candidate) + 2 > limit:
            break
        out = candidate
    return (out + " " + ELLIPSIS) if out else _shorten_token(words[0], limit)


def wrap(text: str | None, width: int, *, max_lines: int | None = None) -> list[str]:
    """``text`` wrapped at word boundaries into lines of at most ``width`` characters.

    Words longer than ``width`` are shortened (see :func:`shorten`), so no line is
    longer and no word is split. With ``max_lines``, the last line kept ends in ``…``
    when text was left out.
    """
    width = max(4, width)
    words = " ".join(_shorten_token(w, width) for w in one_line(text).split(" ") if w)
    lines = textwrap.wrap(words, width, break_long_words=False, break_on_hyphens=False)
    if max_lines is not None and len(lines) > max_lines:
        lines = lines[: max_lines - 1] + [shorten(" ".join(lines[max_lines - 1 :]), width)]
    return lines


def first_sentence(text: str | None) -> str:
    """The first line of ``text``, whitespace collapsed (reasons often carry a traceback tail)."""
    for line in (text or "").splitlines():
        if line.strip():
            return one_line(line)
    return ""


def listed_points(
    points: Sequence[Mapping[str, Any]], intervals: Sequence[Mapping[str, Any]], chosen: Any = None
) -> list[Mapping[str, Any]]:
    """The points a by-call-count table or figure shows: the Pareto front of ``points``,
    plus every point :func:`autotune._select.crossover_intervals` gives an interval to or
    that was ``chosen`` (the winner rule can pick a dominated default: a challenger must
    beat it in enough paired rounds), ordered by compile time."""
    keep = {_select.config_text(p["config"]) for p in _select.pareto_front(points)}
    keep |= {_select.config_text(it["config"]) for it in intervals}
    if chosen is not None:
        keep.add(_select.config_text(chosen))
    seen, rows = set(), []
    for p in sorted(points, key=lambda p: (p["compile_s"], p["run_s"], _select.config_text(p["config"]))):
        text = _select.config_text(p["config"])
        if text in keep and text not in seen:
            seen.add(text)
            rows.append(p)
    return rows
