"""``autotune report``: write the offline report and print each study's table."""

from __future__ import annotations

import argparse

from autotune import _display
from autotune import select as _select
from autotune._errors import StudyError
from autotune.cli._output import console, emit_json, retune_lines, stdout_to_stderr
from autotune.cli._tables import SiteNames, crossover_table, print_legend, say
from autotune.program._config import Config


def function_studies(a: argparse.Namespace, function: str) -> list[str]:
    """The studies of ``function`` in the storage (of every program and objective it was
    tuned for; with FILE, the studies of the file's functions narrowed to it)."""
    import difflib

    from autotune._paths import default_storage_url, redact, storage_url
    from autotune.study import study_summaries

    url = storage_url(a.storage) if a.storage else default_storage_url(a.cache)
    found = study_summaries(url)
    if a.file is not None:
        from autotune.report import studies_for_file

        wanted = set(studies_for_file(a.file, url, all_programs=a.all))
        found = [s for s in found if s["name"] in wanted]
    names = sorted(s["name"] for s in found if s["attrs"].get("function_key") == function)
    if not names:
        keys = sorted({str(s["attrs"].get("function_key")) for s in found if s["attrs"].get("function_key")})
        near = difflib.get_close_matches(function, keys, n=5, cutoff=0.4) or keys[:5]
        raise StudyError(
            f"No study of {function!r} in {redact(url)}"
            + (f"; functions with studies like it: {', '.join(near)}" if near else "")
            + ". Tune it first (`autotune tune FILE` or `autotune tune --recorded`), or pass --storage."
        )
    return names


def cmd_report(a: argparse.Namespace) -> int:
    from autotune.report import report

    function = getattr(a, "function", None)
    if (a.file is not None) + bool(a.study) + (function is not None and a.file is None) != 1:
        raise StudyError(
            "Give one of a study FILE, --function KEY or --study NAME: `autotune report studies/x.py --out DIR`, "
            "`autotune report --function app:step --out DIR` (a recorded function too) or "
            "`autotune report --study NAME --out DIR`."
        )
    with stdout_to_stderr(a.json):  # a study file's prints while it loads go to stderr
        names = a.study if function is None else function_studies(a, function)
        files = report(
            a.out,
            study_names=names,
            file=None if names else a.file,
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
        names.add(r.sites, r.function_key)
    for r in files.reports:
        obj = r.objective
        chosen = Config.from_dict(r.chosen["config"]) if r.chosen else None
        out.print(
            crossover_table(
                r.shown_points,
                obj.compile_weight,
                obj.runtime_weight,
                names=names.of(r.function_key),
                chosen=chosen,
                default=Config.from_dict(r.default_config),
                intervals=r.intervals,
                title=f"{r.function_key} ({r.search}, {len(r.trials)} trials): the cheapest config by call count",
            )
        )
        if r.chosen:
            say(
                out,
                f"chosen for {_select.format_calls(obj.expected_calls)} calls: "
                f"{names.config(chosen, r.function_key)}  cost {_display.cost(r.chosen['cost'])}"
                + (f" (default {_display.cost(r.default['cost'])})" if r.default else ""),
                wide=a.wide,
            )
        say(out, f"measurements complete for {_display.range_text(r.complete_range)} calls", wide=a.wide)
        if not r.in_range:
            say(
                out,
                f"the configs were not measured for {_select.format_calls(obj.expected_calls)} calls; the "
                "chosen one is the best measured one, not a tuned one. Re-tune for it:",
                wide=a.wide,
            )
            for line in retune_lines(r.retune_command(), out.width):
                out.print(line, soft_wrap=True, highlight=False, markup=False)
        bad = [t for t in r.trials if t.failed]
        if bad and a.wide:  # every one with its whole reason: the one place the CLI shows them
            say(out, f"{len(bad)} trial(s) gave no measurement:", wide=True)
            for t in bad:
                say(out, f"#{t.number} {t.outcome}: {names.config(t.config, r.function_key)}", indent="  ", wide=True)
                if t.reason:
                    say(out, t.reason, indent="      ", wide=True)
        elif bad:
            say(
                out,
                f"{len(bad)} trial(s) gave no measurement: "
                + ", ".join(f"#{t.number} {t.outcome}" for t in bad[:12])
                + (" ..." if len(bad) > 12 else "")
                + " (--wide shows each with its full reason)",
            )
    print_legend(out, names)
    say(out, f"wrote {files.html} and {len(files.figures)} figures to {a.out}", wide=a.wide)
    return 0
