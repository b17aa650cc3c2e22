"""The ``autotune`` command: tune study files, inspect and move the cache.

Stand-in of branch wave2-record: the CLI package of task R replaces this file; only
`pending` and `tune --recorded` (calling `autotune.cli._record`) were added here.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
from typing import Any

from rich.console import Console
from rich.table import Table

from .._errors import AutotuneError

def _console(stderr: bool = False) -> Console:
    console = Console(stderr=stderr, highlight=False)
    if not console.is_terminal:  # logs and pipes: do not squeeze tables into 80 columns
        console = Console(stderr=stderr, highlight=False, width=160)
    return console


out = _console()
err = _console(stderr=True)


def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"{text!r} must be at least 1")
    return value


def _nonneg_float(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
    if not math.isfinite(value) or value < 0:
        raise argparse.ArgumentTypeError(f"{text!r} must be a finite number >= 0")
    return value


def _cache_arg(p: argparse.ArgumentParser) -> None:
    p.add_argument("--cache", metavar="URL_OR_PATH", default=None,
                   help="the tuning cache (SQLAlchemy URL or file path); default $AUTOTUNE_CACHE or ~/.cache/autotune/cache.db")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="autotune", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    p = sub.add_parser("tune", help="tune every example of a study file and store the winners in the cache")
    p.add_argument("file", nargs="?", default=None, help="a study file: defines @at.autotuned functions and examples()")
    p.add_argument("--recorded", action="store_true", help="tune the signatures recorded with AUTOTUNE_RECORD instead")
    p.add_argument("--function", default=None, help="with --recorded: only this function key")
    p.add_argument("--trials", type=_positive_int, default=None, help="trials per function (default: the whole space if small, else 32)")
    p.add_argument("--timeout", type=_nonneg_float, default=None, help="stop starting new trials after this many seconds")
    p.add_argument("--expected-calls", type=_nonneg_float, default=None, help="override the decorator's expected_calls")
    p.add_argument("--compile-weight", type=_nonneg_float, default=None)
    p.add_argument("--runtime-weight", type=_nonneg_float, default=None)
    p.add_argument("--sampler", choices=["auto", "tpe", "grid", "random", "nsga2"], default="auto")
    p.add_argument("--objective", choices=["cost", "pareto"], default="cost",
                   help="cost: search the weighted cost; pareto: NSGA-II on (compile s, run s), then pick from the "
                        "front for expected_calls (one study serves every call count)")
    p.add_argument("--storage", default=None, help="Optuna storage URL or file (default: studies.db beside the cache)")
    p.add_argument("--trial-timeout", type=_nonneg_float, default=None, help="kill a trial's compile+run after this many seconds")
    p.add_argument("--trial-memory", type=_nonneg_float, default=None, help="memory cap per trial worker, in GiB")
    p.add_argument("--workers", type=_positive_int, default=1, help="worker processes on one study (one per device is the rule)")
    p.add_argument("--run-seconds", type=_nonneg_float, default=None,
                   help="seconds of runtime sampling per trial (default 0.5; more for noisy machines)")
    p.add_argument("--json", action="store_true", help="print the results as JSON")
    p.add_argument("--join-study", default=None, help=argparse.SUPPRESS)  # internal: a --workers helper
    p.add_argument("--example", type=int, default=None, help=argparse.SUPPRESS)
    _cache_arg(p)

    p = sub.add_parser("pending", help="signatures recorded with AUTOTUNE_RECORD, tuned on this device or not")
    p.add_argument("--json", action="store_true")
    p.add_argument("--wide", action="store_true", help="show full function keys, signatures and reasons")
    _cache_arg(p)

    p = sub.add_parser("sites", help="list the loop sites of a study file's functions")
    p.add_argument("file")
    p.add_argument("--json", action="store_true")

    p = sub.add_parser("best", help="the cached best config per function")
    p.add_argument("--function", default=None, help="function key (module:qualname); default all")
    p.add_argument("--device", default=None, help="device kind or platform to filter on (e.g. cpu, 'NVIDIA H200')")
    p.add_argument("--expected-calls", type=_nonneg_float, default=None, help="re-pick from the stored Pareto set for this call count")
    p.add_argument("--json", action="store_true")
    _cache_arg(p)

    p = sub.add_parser("list", help="every cache entry")
    p.add_argument("--json", action="store_true")
    _cache_arg(p)

    p = sub.add_parser("report", help="an offline HTML report and PNG figures of studies: trade-off, crossovers, sites, history")
    p.add_argument("file", nargs="?", default=None, help="a study file: report on the studies of its functions")
    p.add_argument("--study", action="append", default=None, metavar="NAME", help="report on this study instead (repeatable)")
    p.add_argument("--storage", default=None, help="Optuna storage URL or file (default: studies.db beside the cache)")
    p.add_argument("--out", required=True, metavar="DIR", help="folder for report.html, report.json and the PNG figures")
    p.add_argument("--expected-calls", type=_nonneg_float, default=None, help="re-score for this call count (default: each study's own)")
    p.add_argument("--all", action="store_true", help="with FILE: also the studies of older versions of its functions")
    p.add_argument("--json", action="store_true", help="print the report's data as JSON")
    _cache_arg(p)

    p = sub.add_parser("export", help="write the cache to a JSON file")
    p.add_argument("path")
    _cache_arg(p)

    p = sub.add_parser("import", help="merge a JSON export into the cache (all or nothing)")
    p.add_argument("path")
    p.add_argument("--max-size", type=_nonneg_float, default=None, metavar="MIB", help="refuse files over MIB mebibytes (default 256)")
    _cache_arg(p)
    return parser


def _fmt_s(x: float | None) -> str:
    return "-" if x is None else f"{x:.3f}"


def _fmt_us(x: float | None) -> str:
    return "-" if x is None else f"{x * 1e6:.1f}"


def result_table(result) -> Table:
    """Confirmed configs: compile s, run µs, cost, vs default."""
    table = Table(title=f"{result.study_name}  ({result.sampler}, space {result.space_size}, {len(result.trials)} trials)")
    for col in ("config", "compile s", "run µs", "cost", "vs default"):
        table.add_column(col, justify="left" if col == "config" else "right")
    from .._config import Config

    from .. import _select

    for row in sorted(result.confirmed, key=lambda r: _select.cost(r, result.objective)):
        cfg = Config.from_dict(row["config"])
        cost = _select.cost(row, result.objective)
        mark = " ★" if cfg == result.best_config else ""
        table.add_row(str(cfg) + mark, _fmt_s(row["compile_s"]), _fmt_us(row["run_s"]), f"{cost:.4g}",
                      f"{result.default_cost / cost:.2f}x" if cost > 0 else "-")
    return table


def cmd_tune(a: argparse.Namespace) -> int:
    from .._studyfile import load_examples
    from ._record import cmd_tune_recorded

    if a.recorded == (a.file is not None):
        err.print("[red]error:[/red] give a study FILE or --recorded (one of them): `autotune tune studies/x.py` "
                  "or `autotune tune --recorded`.")
        return 2
    if a.recorded:
        return cmd_tune_recorded(a)

    examples = load_examples(a.file)
    if a.join_study is not None:  # a helper started by --workers: trials only
        ex = examples[a.example]
        fn = ex.fn.with_options(expected_calls=a.expected_calls, compile_weight=a.compile_weight,
                                runtime_weight=a.runtime_weight, cache=a.cache)
        fn.tune(*ex.args, n_trials=a.trials, timeout=a.timeout, sampler=a.sampler, storage=a.storage,
                study_name=a.join_study, join=True, **_trial_options(a), **ex.kwargs)
        return 0
    if a.workers > 1:
        _warn_shared_device(a.workers)
    results = []
    for index, ex in enumerate(examples):
        fn = ex.fn.with_options(expected_calls=a.expected_calls, compile_weight=a.compile_weight,
                                runtime_weight=a.runtime_weight, cache=a.cache)
        err.print(f"[bold]tuning[/bold] {fn.key} (expected_calls={fn.expected_calls:g})")
        helpers = _Helpers(a, index)
        from ..worker import Location

        result = fn.tune(*ex.args, n_trials=a.trials, timeout=a.timeout, sampler=a.sampler,
                         storage=a.storage, progress=not a.json, on_ready=helpers.start, before_finish=helpers.wait,
                         location=Location.study_file(a.file, index),
                         retune=f"autotune tune {os.path.abspath(a.file)} --expected-calls {{calls}}",
                         **_trial_options(a), **ex.kwargs)
        results.append((fn, result))
        if not a.json:
            out.print(result_table(result))
            bad = [t for t in result.trials if t.state not in ("complete", "duplicate")]
            if bad:
                out.print(f"{len(bad)} of {len(result.trials)} trials did not count:")
                for t in bad[:8]:
                    out.print(f"  trial {t.number} {t.state}: {str(t.config)[:80]} — {(t.reason or '').splitlines()[0][:160] if t.reason else ''}")
            out.print(f"winner for {fn.key}: [bold]{result.best_config}[/bold]  cost {result.best_cost:.4g} "
                      f"(default {result.default_cost:.4g}, {result.speedup:.2f}x)  -> cache {fn.cache.url}")
            if len(result.pareto) > 1:
                out.print(crossover_table(result.confirmed, result.objective.compile_weight,
                                          result.objective.runtime_weight, chosen=result.best_config.to_dict(),
                                          default=result.default_config.to_dict(),
                                          title=f"Pareto set of {fn.key}: the cheapest config by call count"))
    if a.json:
        print(json.dumps([{
            "function": fn.key, "best_config": r.best_config.to_dict(), "best_cost": r.best_cost,
            "default_cost": r.default_cost, "study": r.study_name, "storage": r.storage,
            "trials": [t.to_dict() for t in r.trials], "confirmed": r.confirmed, "pareto": r.pareto,
        } for fn, r in results], indent=2))
    return 0


def _trial_options(a: argparse.Namespace) -> dict[str, Any]:
    """The per-trial options of `autotune tune`, as Autotuned.tune takes them."""
    return {"timing": None if a.run_seconds is None else {"target_s": a.run_seconds},
            "objective": a.objective, "trial_timeout": a.trial_timeout,
            "trial_memory_gb": a.trial_memory}


def crossover_table(points: list, compile_weight: float = 1.0, runtime_weight: float = 1.0, *,
                    chosen: dict | None = None, sites: list | None = None, title: str | None = None,
                    default: dict | None = None) -> Table:
    """The Pareto set of ``points`` with the expected-calls intervals where each config wins
    (the one selection rule over every point, the default's included)."""
    from .._select import crossover_intervals, format_calls, pareto_front
    from .._report import config_label

    intervals = crossover_intervals(points, compile_weight, runtime_weight, default=default)
    pareto = pareto_front(points)
    key = lambda c: json.dumps(c, sort_keys=True)  # noqa: E731
    table = Table(title=title)
    for col in ("config", "compile s", "run µs", "cheapest for calls"):
        table.add_column(col, justify="left" if col in ("config", "cheapest for calls") else "right")
    for p in pareto:
        spans = [f"[{format_calls(it['from_calls'])}, {format_calls(it['to_calls'])})"
                 for it in intervals if key(it["config"]) == key(p["config"])]
        mark = " ★" if chosen is not None and key(p["config"]) == key(chosen) else ""
        table.add_row(config_label(p["config"], sites or []) + mark, _fmt_s(p["compile_s"]), _fmt_us(p["run_s"]),
                      "; ".join(spans) or "never cheapest")
    return table


def _warn_shared_device(workers: int) -> None:
    import jax

    if len(jax.devices()) < workers:
        err.print(
            f"[yellow]warning:[/yellow] {workers} workers share {len(jax.devices())} {jax.devices()[0].platform} "
            "device(s) on this machine; concurrent trials disturb each other's timings. The rule is one worker "
            "per device: for more throughput, run `autotune tune FILE --storage postgresql://...` on more machines."
        )


class _Helpers:
    """The extra processes of `--workers K`: they join the study once it is enqueued."""

    def __init__(self, a: argparse.Namespace, index: int):
        self.a, self.index, self.procs = a, index, []

    def start(self, storage: str, study_name: str) -> None:
        import subprocess

        a = self.a
        cmd = [sys.executable, "-m", "autotune", "tune", a.file, "--join-study", study_name, "--example",
               str(self.index), "--storage", storage, "--sampler", a.sampler]
        for flag, value in (("--trials", a.trials), ("--timeout", a.timeout), ("--expected-calls", a.expected_calls),
                            ("--compile-weight", a.compile_weight), ("--runtime-weight", a.runtime_weight),
                            ("--cache", a.cache), ("--run-seconds", a.run_seconds),
                            ("--objective", None if a.objective == "cost" else a.objective),
                            ("--trial-timeout", a.trial_timeout), ("--trial-memory", a.trial_memory)):
            if value is not None:
                cmd += [flag, str(value)]
        self.procs = [subprocess.Popen(cmd) for _ in range(a.workers - 1)]

    def wait(self) -> None:
        failed = [p.args for p in self.procs if p.wait() != 0]
        if failed:
            err.print(f"[yellow]warning:[/yellow] {len(failed)} worker process(es) exited with an error; their completed trials are kept.")


def cmd_sites(a: argparse.Namespace) -> int:
    from .._studyfile import load_examples

    rows = []
    for ex in load_examples(a.file):
        for s in ex.fn.sites(*ex.args, **ex.kwargs):
            rows.append({"function": ex.fn.key, **s.to_dict()})
    if a.json:
        print(json.dumps(rows, indent=2))
        return 0
    table = Table(title=f"loop sites in {a.file}")
    for col in ("function", "site id", "kind", "length", "depth", "parent", "source"):
        table.add_column(col)
    for r in rows:
        table.add_row(r["function"], r["id"], r["kind"], str(r["length"]), str(r["depth"]), r["parent"] or "-", r["source"] or "-")
    out.print(table)
    return 0


def _entries(a: argparse.Namespace) -> list:
    from ..cache import Cache

    return Cache(a.cache).entries(function_key=getattr(a, "function", None))


def _entry_json(e) -> dict[str, Any]:
    return e.to_dict() | {"device_key": e.device_key}


def cmd_best(a: argparse.Namespace) -> int:
    entries = _entries(a)
    if a.device:
        want = a.device.lower()
        entries = [e for e in entries if want in (str(e.device.get("device_kind", "")).lower(), str(e.device.get("platform", "")).lower())]
    if a.expected_calls is not None:
        entries = [e.for_objective(expected_calls=a.expected_calls) for e in entries]
    if not entries:
        err.print("no cache entry matches" + (f" function {a.function!r}" if a.function else "") + (f" on device {a.device!r}" if a.device else "") + ".")
        return 1
    from .._select import crossover_intervals, format_calls, intervals_json

    from .._select import range_json, range_text

    def crossovers(e) -> list:
        return crossover_intervals(e.pareto, float(e.objective.get("compile_weight", 1.0)),
                                   float(e.objective.get("runtime_weight", 1.0)), default=e.default_config)

    calls = lambda e: float(e.objective.get("expected_calls", 0))  # noqa: E731
    if a.json:  # "crossovers": [{"config", "from_calls", "to_calls" (null: unbounded)}] of the Pareto set
        print(json.dumps([_entry_json(e) | {"crossovers": intervals_json(crossovers(e)),
                                            "complete_range": range_json(e.covered_range),
                                            "in_range": e.covers(calls(e)),
                                            "retune_command": e.retune_command(calls(e))} for e in entries], indent=2))
        return 0
    table = Table(title="best configs")
    for col in ("function", "device", "signature", "config", "run µs", "compile s", "expected calls", "cost",
                "cheapest for calls"):
        table.add_column(col)
    chosen_text = lambda c: json.dumps(c, sort_keys=True)  # noqa: E731
    for e in entries:
        m = e.measurements
        compile_s = sum(float(m.get(k, 0.0)) for k in ("trace_s", "lower_s", "compile_s"))
        run_s = m.get("run_s")
        point = next((p for p in e.pareto if chosen_text(p["config"]) == chosen_text(e.config)), None)
        if point is not None:  # re-picked for --expected-calls: show the picked config's own seconds
            compile_s, run_s = point["compile_s"], point["run_s"]
        spans = [f"[{format_calls(it['from_calls'])}, {format_calls(it['to_calls'])})"
                 for it in crossovers(e) if chosen_text(it["config"]) == chosen_text(e.config)]
        table.add_row(e.function_key, e.device_key, e.signature[-48:], json.dumps(e.config), _fmt_us(run_s),
                      _fmt_s(compile_s), f"{e.objective.get('expected_calls', 0):g}", f"{e.cost:.4g}",
                      "; ".join(spans) or ("-" if not e.pareto else "never cheapest"))
    out.print(table)
    for e in entries:
        if not e.covers(calls(e)):
            command = e.retune_command(calls(e))
            out.print(f"{e.function_key}: the configs were not measured for {format_calls(calls(e))} calls (its "
                      f"measurements are complete for {range_text(e.covered_range)} calls); the config above is the "
                      "best measured one, not a tuned one. "
                      + (f"Re-tune for it: {command}" if command else "Re-tune it for that call count."))
    for e in entries:
        if len(e.pareto) > 1:
            out.print(crossover_table(
                e.pareto, float(e.objective.get("compile_weight", 1.0)), float(e.objective.get("runtime_weight", 1.0)),
                chosen=e.config, sites=[{"id": k, **v} for k, v in e.sites.items()], default=e.default_config,
                title=f"{e.function_key} on {e.device.get('device_kind', '?')}: Pareto set, cheapest config by call count"))
    return 0


def cmd_list(a: argparse.Namespace) -> int:
    entries = _entries(a)
    if a.json:
        print(json.dumps([_entry_json(e) for e in entries], indent=2))
        return 0
    table = Table(title=f"{len(entries)} cache entries")
    for col in ("function", "fingerprint", "device", "config", "cost", "created"):
        table.add_column(col)
    for e in entries:
        table.add_row(e.function_key, e.fingerprint[:10], e.device_key, json.dumps(e.config), f"{e.cost:.4g}", e.created_at[:19])
    out.print(table)
    return 0


def cmd_export(a: argparse.Namespace) -> int:
    from ..cache import Cache
    n = (cache := Cache(a.cache)).export_json(a.path)
    out.print(f"exported {n.entries} entries and {n.pending} pending records from {cache.display_url} to {a.path}", soft_wrap=True)
    return 0


def cmd_import(a: argparse.Namespace) -> int:
    from ..cache import MAX_IMPORT_BYTES, Cache

    n = (cache := Cache(a.cache)).import_json(a.path, max_bytes=MAX_IMPORT_BYTES if a.max_size is None else max(1, int(a.max_size * 2**20)))
    out.print(f"imported {n.entries} entries and {n.pending} pending records into {cache.display_url}"
              + (f" ({n.pending_kept} pending records were there already)" if n.pending_kept else ""), soft_wrap=True)
    return 0


def cmd_report(a: argparse.Namespace) -> int:
    from .._select import format_calls
    from .._report import config_label, report

    if (a.file is None) == (not a.study):
        err.print("[red]error:[/red] give a study FILE or --study NAME (one of them): "
                  "`autotune report studies/x.py --out DIR` or `autotune report --study NAME --out DIR`.")
        return 2
    files = report(a.out, study_names=a.study, file=a.file, storage=a.storage, cache=a.cache,
                   expected_calls=a.expected_calls, all_programs=a.all, progress=not a.json)
    if a.json:
        print(json.dumps({"html": files.html, "data": files.data, "figures": files.figures,
                          "studies": [r.to_dict() for r in files.reports]}, indent=2, allow_nan=False))
        return 0
    for r in files.reports:
        obj = r.objective
        out.print(crossover_table(r.pareto, obj.compile_weight, obj.runtime_weight,
                                  chosen=r.chosen["config"] if r.chosen else None, sites=r.sites,
                                  title=f"{r.function_key} ({r.search}, {len(r.trials)} trials): Pareto set, "
                                        "cheapest config by call count"))
        if r.chosen:
            out.print(f"chosen for {format_calls(obj.expected_calls)} calls: [bold]{config_label(r.chosen['config'], r.sites)}"
                      f"[/bold]  cost {r.chosen['cost']:.4g}"
                      + (f" (default {r.default['cost']:.4g})" if r.default else ""))
        bad = [t for t in r.trials if t.outcome not in ("complete", "duplicate")]
        if bad:
            out.print(f"{len(bad)} trial(s) did not count: " + ", ".join(f"#{t.number} {t.outcome}" for t in bad[:12]))
    out.print(f"wrote {files.html} and {len(files.figures)} figures to {a.out}")
    return 0


def cmd_pending(a: argparse.Namespace) -> int:
    from ._record import cmd_pending as pending

    return pending(a)


COMMANDS = {"tune": cmd_tune, "pending": cmd_pending, "sites": cmd_sites, "best": cmd_best, "list": cmd_list,
            "export": cmd_export, "import": cmd_import, "report": cmd_report}


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return COMMANDS[args.command](args)
    except AutotuneError as exc:
        err.print(f"[red]error:[/red] {exc}", soft_wrap=True)
        return 2
    except KeyboardInterrupt as exc:  # Ctrl-C, or SIGTERM / SIGHUP caught by the interrupt latch
        from .._interrupt import Interrupted

        signum = exc.signum if isinstance(exc, Interrupted) else 2
        err.print(f"interrupted ({Interrupted(signum).name}): completed trials are kept in the study; run the "
                  "same command again to resume.")
        return 128 + signum


if __name__ == "__main__":
    sys.exit(main())
