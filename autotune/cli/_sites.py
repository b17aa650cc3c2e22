"""``autotune sites``: the loop sites of a study file's functions, one table per function;
with ``--function KEY`` alone, of a function recorded with ``AUTOTUNE_RECORD=1``, traced on
each recorded signature (no study file needed).

The form column says what the user wrote (``scan``, ``fori``, ``at.loop``, ``while``); a
loop JAX derived from one of them (the backward pass under ``jax.grad``, a
``jax.checkpoint`` copy) is marked ``derived``; a while loop's length is ``dynamic``. A loop a
library built is named by the user's line; ``--wide`` adds the library's own line. A site
the rewrite cannot re-emit for any choice (a loop inside a Pallas kernel) is named below its
table, with the reason: tuning leaves it at its default. A site whose body is checkpointed
(``jax.checkpoint``) is named below its table with its policy and the policies it is tuned over.
"""

from __future__ import annotations

import argparse
import os
import sys
from typing import Any

from autotune._errors import StudyError
from autotune.cli._output import console, emit_json, stdout_to_stderr
from autotune.cli._tables import SiteNames, print_legend, say, table
from autotune.program._config import POLICIES, choice_label

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


def policy_note(name: str, policy: str) -> str:
    """The line under a table that says a site's body is checkpointed and which policies it is tuned over."""
    others = ", ".join(p for p in POLICIES if p != policy)
    return f"site {name}: its body is checkpointed (policy {policy}); tuned over its own policy and {others}"


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
    from autotune.program._space import Space, unrewritable

    with ex.traced():
        return unrewritable(ex.fn.fun, tuple(ex.args), dict(ex.kwargs), dict(ex.fn.jit_kwargs), Space(sites))


def recorded_examples(function: str, cache_location: str | None, say=None) -> list:
    """The recorded calls of ``function`` (``autotune pending``), each rebuilt as a study
    file's example would be: the function imported, its inputs built from the recorded
    signature (the recorded values when kept). A record that cannot be rebuilt is named
    through ``say`` and left out.

    Raises:
        StudyError: nothing of ``function`` is recorded, or no record of it can be rebuilt.
    """
    import difflib

    from autotune.cache import Cache
    from autotune.program._keys import device_info, device_key
    from autotune.record._replay import Skip, describe_record, rebuild, select
    from autotune.record._studyfile import Example

    cache = Cache(cache_location)
    records = select(cache.pending(function), device_key(device_info()))
    if not records:
        keys = sorted({r.function_key for r in cache.pending()})
        near = difflib.get_close_matches(function, keys, n=5, cutoff=0.4) or keys[:5]
        raise StudyError(
            f"No call of {function!r} is recorded in {cache.display_url}"
            + (f"; recorded functions like it: {', '.join(near)}" if near else "")
            + ". Run your program with AUTOTUNE_RECORD=1 to record its calls (`autotune pending` lists them)."
        )
    out, skipped = [], []
    for i, rec in enumerate(records):
        try:
            fn, args, kwargs, _ = rebuild(rec, cache.values_dir)
        except Skip as e:
            skipped.append(f"{describe_record(rec)}: {e}")
            continue
        out.append(Example(fn, args, kwargs, i, f"recorded {describe_record(rec)}"))
    for line in skipped:
        (say or print)(f"skipped {line}")
    if not out:
        raise StudyError(f"No recorded call of {function!r} can be traced again: {skipped[0]}.")
    return out


def _examples(a: argparse.Namespace) -> list:
    from autotune.record._studyfile import load_examples

    if a.file is None and a.function is None:
        raise StudyError(
            "Give a study FILE or --function KEY: `autotune sites studies/x.py`, or `autotune sites "
            "--function app:step` for a function recorded with AUTOTUNE_RECORD=1."
        )
    if a.file is None:
        return recorded_examples(a.function, getattr(a, "cache", None), say=lambda s: print(s, file=sys.stderr))
    examples = load_examples(a.file)
    if a.function is not None:
        examples = [ex for ex in examples if ex.fn.key == a.function]
        if not examples:
            raise StudyError(f"Study file {a.file!r} has no example of function {a.function!r}.")
    return examples


def cmd_sites(a: argparse.Namespace) -> int:
    with stdout_to_stderr(a.json):  # the study file's prints while it loads and traces go to stderr
        groups = []
        for ex in _examples(a):
            found = ex.sites()
            bad = _unrewritable(ex, found)
            title = ex.fn.key if a.file else ex.path.removeprefix("recorded ")
            groups.append((ex.fn.key, title, [{**s.to_dict(), "rewrite_error": bad.get(s.id)} for s in found]))
    if a.json:
        emit_json([{"function": key, **s} for key, _, sites in groups for s in sites])
        return 0
    out = console(wide=a.wide)
    names = SiteNames(a.wide)
    derived = False
    for key, title, sites in groups:
        names.add(sites, key)
        named = names.of(key)
        cols = (
            ("site", "form", "length", "depth", "parent", "default", "source", "library")
            if a.wide
            else ("site", "form", "length", "parent", "source")
        )
        t = table(f"loop sites of {title}" + ("" if sites else ": none"), cols, right=("length", "depth"), wide=a.wide)
        for s in sites:
            derived = derived or bool(s.get("derived"))
            parent = named.name(s["parent"]) if s.get("parent") else "-"
            row = [named.name(s["id"]), form_text(s), length_text(s)]
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
            if s.get("policy"):
                say(out, policy_note(named.name(s["id"]), s["policy"]))
            if s.get("rewrite_error"):
                why = s["rewrite_error"]
                say(out, f"site {named.name(s['id'])} cannot be rewritten ({why}): tuning leaves it at its default")
    print_legend(out, names)
    if derived:
        say(out, DERIVED_NOTE, wide=a.wide)
    return 0
