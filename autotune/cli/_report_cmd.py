"""``autotune report``: write the offline report and print each study's table."""

from __future__ import annotations

import argparse

from .. import _display, _select
from .._errors import StudyError
from ._output import console, emit_json, retune_lines, stdout_to_stderr
from ._tables import SiteNames, crossover_table, print_legend


def cmd_report(a: argparse.Namespace) -> int:
    from ..report import report

    if (a.file is None) == (not a.study):
        raise StudyError(
            "Give a study FILE or --study NAME (one of them): `autotune report studies/x.py --out DIR` "
            "or `autotune report --study NAME --out DIR`."
        )
    with stdout_to_stderr(a.json):  # a study file's prints while it loads go to stderr
        files = report(
            a.out,
            study_names=a.study,
            file=a.file,
            storage=a.storage,
            cache=a.cache,
            expected_calls=a.expected_calls,
            all_programs=a.all,
            progress=not a.json,
        )
    if a.json:
        emit_json(
            {
                "html": files.html,
                "data": files.data,
                "figures": files.figures,
                "studies": [r.to_dict() for r in files.reports],
            }
        )
        return 0
    out = console(wide=a.wide)
    names = SiteNames(a.wide)
    for r in files.reports:
        names.add(r.sites)
        obj = r.objective
        chosen = r.chosen["config"] if r.chosen else None
        out.print(
            crossover_table(
                r.shown,
                obj.compile_weight,
                obj.runtime_weight,
                names=names,
                chosen=chosen,
                default=r.default_config,
                intervals=r.intervals,
                title=f"{r.function_key} ({r.search}, {len(r.trials)} trials): the cheapest config by call count",
            )
        )
        if r.chosen:
            out.print(
                f"chosen for {_select.format_calls(obj.expected_calls)} calls: "
                f"[bold]{names.config(chosen)}[/bold]  cost {_display.cost(r.chosen['cost'])}"
                + (f" (default {_display.cost(r.default['cost'])})" if r.default else "")
            )
        out.print(f"measurements complete for {_select.range_text(r.complete_range)} calls")
        if not r.in_range:
            out.print(
                f"the configs were not measured for {_select.format_calls(obj.expected_calls)} calls; the "
                "chosen one is the best measured one, not a tuned one. Re-tune for it:"
            )
            for line in retune_lines(r.retune_command(), out.width):
                out.print(line, soft_wrap=True, highlight=False, markup=False)
        bad = [t for t in r.trials if t.failed]
        if bad:
            out.print(
                f"{len(bad)} trial(s) gave no measurement: "
                + ", ".join(f"#{t.number} {t.outcome}" for t in bad[:12])
                + (" ..." if len(bad) > 12 else "")
            )
    print_legend(out, names)
    out.print(f"wrote {files.html} and {len(files.figures)} figures to {a.out}", markup=False)
    return 0
