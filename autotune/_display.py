"""What people see, the same in the CLI and the report: seconds with their unit, text
shortened or wrapped at word boundaries (never cut mid-word, a number never parted from its
unit), the short names of loop sites (:func:`site_names`), and which configs a
by-call-count table lists.

The CLI's tables and the report's HTML and PNG figures all format through here, so a
reason or a time reads the same everywhere. Which config wins is never decided here:
that is :mod:`autotune.select`.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from typing import Any

from autotune import select as _select

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


def memory(n: int | float | None) -> str:
    """Bytes for people, in binary units: ``"512 B"``, ``"1.5 KiB"``, ``"12 GiB"``, ``"-"`` for None.

    Example::

        >>> memory(512), memory(1536), memory(12 * 2**30), memory(None)
        ('512 B', '1.5 KiB', '12 GiB', '-')
    """
    if n is None:
        return "-"
    for unit, size in (("TiB", 2**40), ("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if abs(n) >= size:
            return f"{n / size:.3g} {unit}"
    return f"{int(n)} B"


def one_line(text: str | None) -> str:
    """Every run of whitespace (newlines included) as one space."""
    return " ".join((text or "").split())


def _shorten_token(word: str, limit: int) -> str:
    """A single word longer than ``limit`` (a path, a URL): keep its tail after the last
    ``/`` when that fits, else its head, marked with an ellipsis."""
    if len(word) <= limit:
        return word
    m = re.search(r"([/:])([^/:]+)[/:]?$", word)
    sep, tail = (m[1], m[2]) if m else ("/", word.rstrip("/").rsplit("/", 1)[-1])
    if 0 < len(tail) < limit:
        return ELLIPSIS + sep + tail if len(tail) + 2 <= limit else ELLIPSIS + tail
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
    for i, w in enumerate(words):
        candidate = f"{out} {w}" if out else w
        if len(candidate) + 2 > limit:
            # a key or path that does not fit keeps its tail (``tuning …:advantages``), not just ``…``
            room, last = limit - len(out) - (1 if out else 0), i == len(words) - 1
            if re.search(r"[/:].", w) and room >= (8 if last else 10):
                short = _shorten_token(w, room if last else room - 2)
                return (f"{out} " if out else "") + short + ("" if last else " " + ELLIPSIS)
            break
        out = candidate
    return (out + " " + ELLIPSIS) if out else _shorten_token(words[0], limit)


_UNIT = re.compile(r"^(s|ms|µs|ns|calls?|×|%)[),.;:\]]*$")
_GLUED = re.compile(r"^(★|≡|\(default\)[),.;:]*)$")


def _tokens(text: str | None, breaks: str = "") -> list[str]:
    """The unbreakable pieces of ``text``: words, with a unit kept on its number (``3.34 s``)
    and a mark kept on the word before it (``scan×2 ★ (default)``); with ``breaks``, a word
    may also end after one of those characters (``lambda_returns:`` / ``advantages``)."""
    out: list[str] = []
    for w in one_line(text).split(" "):
        if not w:
            continue
        if out and ((_UNIT.match(w) and out[-1][-1:].isdigit()) or _GLUED.match(w)):
            out[-1] += "\u00a0" + w  # joined by a no-break space: never parted by a wrap
            continue
        if breaks:
            pieces = re.findall(rf"[^{re.escape(breaks)}]*(?:[{re.escape(breaks)}]+|$)", w)
            pieces = [p for p in pieces if p]
            out += [pieces[0]] + ["\u0000" + p for p in pieces[1:]]
        else:
            out.append(w)
    return out


def longest_piece(text: str | None, breaks: str = "") -> int:
    """The width a column needs so that :func:`wrap` (with the same ``breaks``) never has to
    shorten a piece of ``text``."""
    return max((len(t.lstrip("\u0000")) for t in _tokens(text, breaks)), default=0)


def wrap(
    text: str | None,
    width: int,
    *,
    max_lines: int | None = None,
    breaks: str = "",
    fold: bool = False,
    keep_long: bool = False,
) -> list[str]:
    """``text`` wrapped at word boundaries into lines of at most ``width`` characters.

    A unit stays beside its number (``3.34 s``) and a ``★`` or ``(default)`` beside the word
    before it. Words longer than ``width`` are shortened (see :func:`shorten`), so no line is
    longer and no word is split; ``fold=True`` instead splits them (``--wide`` shows all);
    ``keep_long=True`` puts them whole on a line of their own (a path to copy, in prose).
    ``breaks``: characters after which a word may also end a line (``":/"`` for ids). With
    ``max_lines``, the last line kept ends in ``…`` when text was left out.

    Example::

        >>> wrap("cost 3.012 s (default 3.34 s)", 27)
        ['cost 3.012 s (default', '3.34 s)']
    """
    width = max(4, width)
    lines: list[str] = []
    line = ""
    for tok in _tokens(text, breaks):
        joined = tok.startswith("\u0000")
        tok = tok.lstrip("\u0000")
        if len(tok) > width and not keep_long:
            if fold:
                chunks = [tok[i : i + width] for i in range(0, len(tok), width)]
            else:
                chunks = [_shorten_token(tok.replace("\u00a0", " "), width)]
        else:
            chunks = [tok]
        for chunk in chunks:
            sep = "" if joined or not line else " "
            if line and len(line) + len(sep) + len(chunk) <= width:
                line += sep + chunk
            else:
                if line:
                    lines.append(line)
                line = chunk
            joined = False
    if line:
        lines.append(line)
    lines = [ln.replace("\u00a0", " ") for ln in lines]
    if max_lines is not None and len(lines) > max_lines:
        lines = lines[: max_lines - 1] + [shorten(" ".join(lines[max_lines - 1 :]), width)]
    return lines


def first_sentence(text: str | None) -> str:
    """The first line of ``text``, whitespace collapsed (reasons often carry a traceback tail)."""
    for line in (text or "").splitlines():
        if line.strip():
            return one_line(line)
    return ""


def range_text(complete: Mapping[str, Any] | None) -> str:
    """A range of call counts (:func:`autotune.select.complete_range`) for people: ``[0, 12,500]``,
    ``[1,000, 1,000]``, ``[0, ∞)``, or ``unknown``.

    Example::

        >>> range_text({"from_calls": 0.0, "to_calls": None}), range_text({"from_calls": 1000.0, "to_calls": 1000.0})
        ('[0, ∞)', '[1,000, 1,000]')
    """
    if not complete:
        return "unknown"
    hi = complete.get("to_calls")
    hi = math.inf if hi is None else float(hi)
    lo = _select.format_calls(float(complete.get("from_calls", 0.0)))
    return f"[{lo}, ∞)" if hi == math.inf else f"[{lo}, {_select.format_calls(hi)}]"


def listed_points(points: Sequence[Any], intervals: Sequence[Mapping[str, Any]], chosen: Any = None) -> list[Any]:
    """The points (:class:`autotune.select.Point`) a by-call-count table or figure shows: the
    Pareto front of ``points``, plus every point :func:`autotune.select.crossover_intervals`
    gives an interval to or whose config was ``chosen`` (a ``Config``: the winner rule can pick a
    dominated default: a challenger must beat it in enough paired rounds), ordered by compile time."""
    keep = {p.config for p in _select.pareto_front(points)} | {it["config"] for it in intervals}
    if chosen is not None:
        keep.add(chosen)
    seen, rows = set(), []
    for p in sorted(points, key=lambda p: (p.compile_cost_s, p.run_cost_s, p.config.to_json())):
        if p.config in keep and p.config not in seen:
            seen.add(p.config)
            rows.append(p)
    return rows


MAX_NAME = 14
"""An ``at.loop`` name up to this long is shown as it is; longer names and every other site
id get a short alias (``s1``, ``s2``...)."""
_ALIAS = re.compile(r"^s\d+$")
_WHERE = re.compile(r"^(?P<form>\w+)@(?P<file>.*?)(?::(?P<line>\d+))?(?:#(?P<k>\d+))?$")


def _site_key(site_id: str) -> tuple:
    """Where a site sits in its function, read from its id alone (an entry of the cache keeps
    its sites by id, in no order): a nested site right after its parent; at each level the
    named ``at.loop`` sites first (by name), then the loops by file, line and ``#k``."""
    key = []
    for part in site_id.split("/"):
        m = _WHERE.match(part)
        if m is None:
            key.append((0, part, 0, 0, ""))
        else:
            key.append((1, m["file"], int(m["line"] or 0), int(m["k"] or 1), m["form"]))
    return tuple(key)


def site_names(sites: Sequence[Any], *, loop_names: Mapping[str, str] | None = None) -> dict[str, str]:
    """The short name of each loop site of ONE function: the rule every command and the
    report share, so ``s2`` means the same loop in ``tune``, ``best``, ``list``, ``report``.

    A site whose ``at.loop`` name is at most :data:`MAX_NAME` characters keeps that name;
    every other site is ``s1``, ``s2``..., numbered in the function's site order (see
    :func:`_site_key`: read from the ids, so it does not depend on which command lists them,
    nor in what order).

    Arguments:
        sites: the function's site ids, or sites (dicts or ``LoopSite`` objects with ``id`` and,
            for an ``at.loop``, ``name`` or ``kind == "loop"``).
        loop_names: ``{site id: at.loop name}`` when ``sites`` are bare ids.

    Example::

        >>> site_names(["fori@train.py:54", "scan@train.py:42", "scan@train.py:42#2", "smooth"],
        ...            loop_names={"smooth": "smooth"})
        {'smooth': 'smooth', 'scan@train.py:42': 's1', 'scan@train.py:42#2': 's2', 'fori@train.py:54': 's3'}
    """
    named = dict(loop_names or {})
    ids = []
    for s in sites:
        if isinstance(s, str):
            sid = s
        else:
            get = s.get if isinstance(s, Mapping) else lambda k, s=s: getattr(s, k, None)
            sid = str(get("id"))
            name = get("name") or (sid if get("kind") == "loop" else None)
            if name:
                named[sid] = str(name)
        if sid not in ids:
            ids.append(sid)
    ids.sort(key=_site_key)
    keep = {
        sid: named[sid] for sid in ids if sid in named and len(named[sid]) <= MAX_NAME and not _ALIAS.match(named[sid])
    }
    out, count, taken = {}, 0, set(keep.values())
    for sid in ids:
        if sid in keep:
            out[sid] = keep[sid]
            continue
        count += 1
        while f"s{count}" in taken:
            count += 1
        out[sid] = f"s{count}"
    return out


def site_legend(names: Mapping[str, str], derived: Sequence[str] = ()) -> list[str]:
    """``s1 = scan@train.py:42`` for each shortened name, in the names' order; a loop JAX
    derived (the backward pass under ``jax.grad``) says so: ``s2 = scan@train.py:42#2 (derived)``."""
    return [
        f"{short} = {sid}" + (" (derived)" if sid in derived else "") for sid, short in names.items() if short != sid
    ]
