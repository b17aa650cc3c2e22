"""``autotune sites``: the loop sites of a study file's functions, one table per function.

The form column says what the user wrote (``scan``, ``fori``, ``at.loop``, ``while``); a
loop JAX derived from one of them (the backward pass under ``jax.grad``, a
``jax.checkpoint`` copy) is marked ``derived``; a while loop's length is ``dynamic``. A loop a
library built is named by the user's line; ``--wide`` adds the library's own line. A site
the rewrite cannot re-emit for any choice (a loop inside a Pallas kernel) is named below its
table, with the reason: tuning leaves it at its default.
"""

from __future__ import annotations

import argparse
import os
from typing import Any

from .._config import choice_label
from ._output import console, emit_json, stdout_to_stderr
from ._tables import SiteNames, print_legend, table

FORMS = {"loop": "at.loop", "scan": "scan", "fori": "fori", "while": "while"}
DERIVED_NOTE = (
    "derived: a loop JAX made from one of yours (the backward pass under jax.grad, or a "
    "jax.checkpoint copy); it is tuned as an ordinary scan."
)


def form_text(site: dict[str, Any]) -> str:
    """``fori``, ``at.loop``, ``while``...; ``scan, derived`` for a loop JAX derived; a fori_loop
    with a traced trip count (tuned as a while loop) is ``fori (while)``."""
    form = FORMS.get(site.get("form") or site.get("kind"), site.get("form") or "?")
    if site.get("kind") == "while" and site.get("form") == "fori":
        form = "fori (while)"
    return f"{form}, derived" if site.get("derived") else form


def length_text(site: dict[str, Any]) -> str:
    return "dynamic" if site.get("length") is None else str(site["length"])


def _source(site: dict[str, Any], wide: bool) -> str:
    src = site.get("source")
    if not src:
        return "-"
    return src if wide else os.path.basename(src)


def _unrewritable(ex, sites: list) -> dict[str, str]:
    """``{site id: why}`` for the sites of an example the rewrite cannot re-emit for any choice
    (one extra trace of the function when every site can be rewritten)."""
    from .._space import Space, unrewritable

    with ex.traced():
        return unrewritable(ex.fn.fun, tuple(ex.args), dict(ex.kwargs), dict(ex.fn.jit_kwargs), Space(sites))


def cmd_sites(a: argparse.Namespace) -> int:
    from .._studyfile import load_examples

    with stdout_to_stderr(a.json):  # the study file's prints while it loads and traces go to stderr
        groups = []
        for ex in load_examples(a.file):
            found = ex.sites()
            bad = _unrewritable(ex, found)
            groups.append((ex.fn.key, [{**s.to_dict(), "rewrite_error": bad.get(s.id)} for s in found]))
    if a.json:
        emit_json([{"function": key, **s} for key, sites in groups for s in sites])
        return 0
    out = console(wide=a.wide)
    names = SiteNames(a.wide)
    derived = False
    for key, sites in groups:
        names.add(sites)
        cols = (
            ("site", "form", "length", "depth", "parent", "default", "source", "library")
            if a.wide
            else ("site", "form", "length", "parent", "source")
        )
        t = table(f"loop sites of {key}" + ("" if sites else ": none"), cols, right=("length", "depth"))
        for s in sites:
            derived = derived or bool(s.get("derived"))
            parent = names.name(s["parent"]) if s.get("parent") else "-"
            row = [names.name(s["id"]), form_text(s), length_text(s)]
            if a.wide:
                row += [
                    str(s.get("depth", 0)),
                    parent,
                    choice_label(s.get("default") or {}),
                    _source(s, True),
                    s.get("library_source") or "-",
                ]
            else:
                row += [parent, _source(s, False)]
            t.add_row(*row)
        out.print(t)
        for s in sites:
            if s.get("rewrite_error"):
                why = s["rewrite_error"]
                out.print(
                    f"site {names.name(s['id'])} cannot be rewritten ({why}): tuning leaves it at its default",
                    highlight=False,
                    markup=False,
                )
    print_legend(out, names)
    if derived:
        out.print(DERIVED_NOTE)
    return 0
