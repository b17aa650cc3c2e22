"""``autotune sites``: the loop sites of a study file's functions, one table per function.

The form column says what the user wrote (``scan``, ``fori``, ``at.loop``, ``while``); a
loop JAX derived from one of them (the backward pass under ``jax.grad``, a
``jax.checkpoint`` copy) is marked ``derived``; a while loop's length is ``dynamic``.
"""

from __future__ import annotations

import argparse
import os
from typing import Any

from .._config import choice_label
from ._output import console, emit_json, stdout_to_stderr
from ._tables import SiteNames, print_legend, table

FORMS = {"loop": "at.loop", "scan": "scan", "fori": "fori", "while": "while"}
DERIVED_NOTE = ("derived: a loop JAX made from one of yours (the backward pass under jax.grad, or a "
                "jax.checkpoint copy); it is tuned as an ordinary scan.")


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


def cmd_sites(a: argparse.Namespace) -> int:
    from .._studyfile import load_examples

    with stdout_to_stderr(a.json):  # the study file's prints while it loads and traces go to stderr
        groups = []
        for ex in load_examples(a.file):
            groups.append((ex.fn.key, [s.to_dict() for s in ex.sites()]))
    if a.json:
        emit_json([{"function": key, **s} for key, sites in groups for s in sites])
        return 0
    out = console(wide=a.wide)
    names = SiteNames(a.wide)
    derived = False
    for key, sites in groups:
        names.add(sites)
        cols = ("site", "form", "length", "depth", "parent", "default", "source") if a.wide else \
            ("site", "form", "length", "parent", "source")
        t = table(f"loop sites of {key}" + ("" if sites else ": none"), cols, right=("length", "depth"))
        for s in sites:
            derived = derived or bool(s.get("derived"))
            parent = names.name(s["parent"]) if s.get("parent") else "-"
            row = [names.name(s["id"]), form_text(s), length_text(s)]
            if a.wide:
                row += [str(s.get("depth", 0)), parent, choice_label(s.get("default") or {}), _source(s, True)]
            else:
                row += [parent, _source(s, False)]
            t.add_row(*row)
        out.print(t)
    print_legend(out, names)
    if derived:
        out.print(DERIVED_NOTE)
    return 0
