"""The command line: every subcommand, its options, and the argv of ``--workers`` helpers.

The helpers' argv is derived from the parsed arguments (every option of ``tune`` that is
not at its default is emitted again), so a new option of ``tune`` reaches them without
anyone keeping a list.
"""

from __future__ import annotations

import argparse
import math
from collections.abc import Callable
from typing import Any

from autotune.cli._types import duration, memory_size

DESCRIPTION = "Tune the loop structure of JAX programs (for / scan / fori / unroll), and inspect the tuning cache."
HELPER_ONLY = ("join_study", "example")
"""Hidden ``tune`` options that only a ``--workers`` helper gets."""
NOT_FOR_HELPERS = ("workers", "json", "wide", "storage", "reconfirm") + HELPER_ONLY
"""``tune`` options a helper does not inherit: it starts no helpers, prints nothing, confirms
nothing, and gets its storage through the environment (a password in argv would show in ``ps``)."""


def _number(name: str, kind: type, least: float, above: bool = False, word: str = "") -> Callable[[str], Any]:
    """An argparse type called ``name``: a whole number (``kind`` int) or a finite one (float), at
    least ``least`` (more than it where ``above``); ``word`` is a value the option takes besides."""

    def check(text: str) -> Any:
        if word and text == word:
            return text
        try:
            value = kind(text)
        except ValueError:
            number = "a whole number" if kind is int else "a number"
            raise argparse.ArgumentTypeError(
                f"{text!r} is {f'neither {word} nor' if word else 'not'} {number}"
            ) from None
        if (kind is float and not math.isfinite(value)) or value < least or (above and value == least):
            bound = f"at least {least}" if kind is int else f"a finite number {'>' if above else '>='} {least:g}"
            raise argparse.ArgumentTypeError(f"{text!r} must be {f'{word} or ' if word else ''}{bound}")
        return value

    check.__name__ = name
    return check


positive_int = _number("positive_int", int, 1)
builders_count = _number("builders_count", int, 0, word="auto")  # --builders: auto or K >= 0
nonneg_float = _number("nonneg_float", float, 0)
positive_float = _number("positive_float", float, 0, above=True)  # --run-seconds: no sampling times nothing


def _one_of(name: str):
    """An argparse type accepting the values ``autotune._options`` lists under ``name`` (their
    one home; ``autotune.study`` re-exports them). Imported when ``tune`` parses; it loads
    neither JAX nor Optuna, so a bad option is answered at once."""

    def check(text: str) -> str:
        from autotune import _options

        allowed = getattr(_options, name)
        if text not in allowed:
            raise argparse.ArgumentTypeError(f"{text!r} is not one of {', '.join(allowed)}")
        return text

    check.__name__ = name.lower()
    return check


def _cache_arg(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--cache",
        metavar="URL_OR_PATH",
        default=None,
        help="the tuning cache (SQLAlchemy URL or file path); default $AUTOTUNE_CACHE or ~/.cache/autotune/cache.db",
    )


def _wide_arg(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--wide",
        action="store_true",
        help="show everything, one line per row: full site ids, signatures, device keys, every trial's "
        "whole reason (otherwise tables fit the terminal, or 80 columns in a pipe)",
    )


def _storage_arg(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--storage",
        default=None,
        metavar="URL_OR_PATH",
        help="Optuna storage URL or file (default: studies.db beside the cache)",
    )


def _numbers(p: argparse.ArgumentParser, *rows: tuple[str, Callable[[str], Any], str, str]) -> None:
    """Options that take one checked number (flag, type, metavar, help), default None: the decorator's or
    :class:`TuneOptions`' own default applies."""
    for flag, kind, metavar, text in rows:
        p.add_argument(flag, type=kind, default=None, metavar=metavar, help=text)


_TIME_BUDGET_HELP = (
    "with --recorded: T (90s, 30m, 1.5h or seconds) for all the recorded functions, split by "
    "calls × default runtime; each stops at its share (or at --trials, whichever comes first)"
)
_BUILDERS_HELP = (
    "processes compiling configs on this machine's cores while the worker measures (it only loads them): "
    "K, 0 (compile in the worker) or auto (default: min(4, cores-1) when the worker owns a TPU v5e chip)"
)
_NEIGHBOURS_HELP = "start each study from nothing, not from the cache's configs of the function at other signatures"
_MAX_MEMORY_HELP = "memory budget: 12GiB, 512MB, bytes or a fraction of the device's (0.5); default: the decorator's"
_PROCESSES_HELP = (
    "how many processes will run each function (each calling it --expected-calls times); "
    "override the decorator's processes (default 1)"
)


def _tune_parser(sub) -> None:
    p = sub.add_parser("tune", help="tune every example of a study file (or recorded calls) and store the winners")
    p.add_argument(
        "file",
        nargs="?",
        default=None,
        help="a study file: defines @at.autotuned functions and examples() (or use --recorded)",
    )
    p.add_argument(
        "--recorded",
        action="store_true",
        help="tune the calls recorded with AUTOTUNE_RECORD (see `autotune pending`) instead of a FILE",
    )
    p.add_argument("--function", default=None, metavar="KEY", help="only this function (module:qualname)")
    _numbers(
        p,
        ("--trials", positive_int, "N", "trials per function (default: the whole space if small, else 32)"),
        ("--timeout", nonneg_float, "S", "stop starting new trials after this many seconds"),
        ("--time-budget", duration, "T", _TIME_BUDGET_HELP),
        ("--expected-calls", nonneg_float, "N", "override the decorator's expected_calls"),
        ("--compile-weight", nonneg_float, "W", "override the decorator's compile_weight (default 1)"),
        ("--runtime-weight", nonneg_float, "W", "override the decorator's runtime_weight (default 1)"),
        ("--processes", positive_int, "P", _PROCESSES_HELP),
        ("--max-memory", memory_size, "SIZE", _MAX_MEMORY_HELP),
    )
    p.add_argument(
        "--compilation-cache",
        choices=("auto", "on", "off"),
        default=None,
        help="whether JAX's persistent compilation cache is on where they run, so processes after the first "
        "load the executable (measured) instead of compiling it; auto: detect it (default: the decorator's)",
    )
    p.add_argument(
        "--xla",
        choices=("auto", "on", "off"),
        default="auto",
        help="search XLA compile options per function too (xla:O1, ...; `autotune` lists them in the README); "
        "auto: on GPU, and on CPU where compile is a large share of the default's cost",
    )
    p.add_argument(
        "--sampler",
        type=_one_of("SAMPLERS"),
        default="auto",
        metavar="NAME",
        help="auto (the whole grid when it fits the budget, else the ladder for one scan site, else TPE; "
        "NSGA-II for --search pareto), tpe, grid, random, nsga2 or ladder (one scan site's unroll factors "
        "walked from the default until the cost stops falling)",
    )
    p.add_argument(
        "--search",
        "--objective",  # the old name (at.Objective is the weights): still accepted, with a note
        action=_Renamed,
        dest="search",
        type=_one_of("SEARCHES"),
        default="cost",
        metavar="SEARCH",
        help="cost: search the weighted cost; pareto: NSGA-II on (compile s, run s), then pick from the "
        "front for expected_calls (one study serves every call count); --objective is its deprecated name",
    )
    _storage_arg(p)
    _numbers(
        p,
        ("--trial-timeout", nonneg_float, "S", "kill a trial's compile+run after this many seconds"),
        ("--trial-memory", nonneg_float, "GIB", "memory cap per trial worker, in GiB"),
        ("--builders", builders_count, "K", _BUILDERS_HELP),
    )
    p.add_argument(
        "--workers",
        type=positive_int,
        default=1,
        metavar="K",
        help="worker processes on one study (one per device is the rule)",
    )
    p.add_argument(
        "--timing",
        type=_one_of("TIMING_MODES"),
        default=None,
        metavar="MODE",
        help="how a call's runtime is timed: steady (calls back to back, the default), blocking (each call "
        "waited for: a program serving one request at a time) or device (the profiler's device time)",
    )
    _numbers(
        p,
        (
            "--run-seconds",
            positive_float,
            "S",
            "seconds of runtime sampling per trial (default 0.5; more for noisy machines)",
        ),
        (
            "--confirm-top",
            positive_int,
            "K",
            "how many of the cheapest configs to re-time side by side with the default "
            "(default 3; at least one besides it)",
        ),
        (
            "--confirm-rounds",
            positive_int,
            "R",
            "in how many interleaved rounds (default 3; fewer is faster and noisier)",
        ),
    )
    p.add_argument(
        "--tier-up",
        action="store_true",
        help="pick the winners for @at.autotuned(tier_up=True): a config that compiles much slower than the "
        "default is charged what its background compile costs the calls the default serves, not a stall "
        "(a decorator with tier_up=True turns it on too)",
    )
    p.add_argument("--no-neighbours", action="store_true", help=_NEIGHBOURS_HELP)
    p.add_argument(
        "--reconfirm",
        action="store_true",
        help="re-time the contenders of a finished study (one with nothing new to measure, which "
        "otherwise stops at once); its cache entry changes only if a challenger beats it",
    )
    p.add_argument("--json", action="store_true", help="print the results as JSON (nothing else on stdout)")
    _wide_arg(p)
    p.add_argument("--join-study", default=None, help=argparse.SUPPRESS)  # internal: a --workers helper
    p.add_argument("--example", type=int, default=None, help=argparse.SUPPRESS)
    _cache_arg(p)


class Parser(argparse.ArgumentParser):
    """An argument parser whose usage errors are one line (no usage block before it): the
    command, what is wrong, and where the options are listed; exit status 2."""

    def error(self, message: str):
        self.exit(2, f"{self.prog}: error: {message}. `{self.prog} --help` lists the options.\n")


def version_text() -> str:
    """``autotune 0.2.0 (Python 3.11.9)``: what ``autotune --version`` prints (no JAX import)."""
    import platform

    from autotune import __version__

    return f"autotune {__version__} (Python {platform.python_version()})"


def build_parser() -> argparse.ArgumentParser:
    """The ``autotune`` argument parser (``prog="autotune"``)."""
    parser = Parser(prog="autotune", description=DESCRIPTION)
    parser.add_argument("--version", action="version", version=version_text())
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    _tune_parser(sub)

    p = sub.add_parser("sites", help="list the loop sites of a study file's functions, or of a recorded function")
    p.add_argument("file", nargs="?", default=None, help="a study file (or use --function KEY for a recorded function)")
    p.add_argument(
        "--function",
        default=None,
        metavar="KEY",
        help="with FILE: only this function; alone: a function recorded with AUTOTUNE_RECORD, traced on "
        "its recorded signature (`autotune pending` lists them)",
    )
    p.add_argument("--json", action="store_true", help="print the sites as JSON (nothing else on stdout)")
    _wide_arg(p)

    p = sub.add_parser("best", help="the cached best config per function")
    p.add_argument("--function", default=None, metavar="KEY", help="function key (module:qualname); default all")
    p.add_argument("--device", default=None, help="device kind or platform to filter on (e.g. cpu, 'NVIDIA H200')")
    _numbers(
        p,
        ("--expected-calls", nonneg_float, "N", "re-pick from the stored measurements for this call count"),
        ("--processes", positive_int, "P", "re-pick for P processes running it (each --expected-calls times)"),
    )
    p.add_argument(
        "--compilation-cache",
        choices=("on", "off"),
        default=None,
        help="re-pick with JAX's persistent compilation cache on or off (default: the entry's)",
    )
    p.add_argument("--json", action="store_true")
    _wide_arg(p)
    _cache_arg(p)

    p = sub.add_parser("list", help="every cache entry")
    p.add_argument("--json", action="store_true")
    _wide_arg(p)
    _cache_arg(p)

    p = sub.add_parser("pending", help="calls recorded with AUTOTUNE_RECORD, and whether this device has them tuned")
    p.add_argument("--json", action="store_true")
    _wide_arg(p)
    _cache_arg(p)

    p = sub.add_parser(
        "report", help="an offline HTML report and PNG figures of studies: trade-off, crossovers, sites, history"
    )
    p.add_argument("file", nargs="?", default=None, help="a study file: report on the studies of its functions")
    p.add_argument(
        "--study", action="append", default=None, metavar="NAME", help="report on this study instead (repeatable)"
    )
    p.add_argument(
        "--function",
        default=None,
        metavar="KEY",
        help="report on the studies of this function (module:qualname), a recorded one too; with FILE, only it",
    )
    _storage_arg(p)
    p.add_argument(
        "--out", required=True, metavar="DIR", help="folder for report.html, report.json and the PNG figures"
    )
    _numbers(p, ("--expected-calls", nonneg_float, "N", "re-score for this call count (default: each study's own)"))
    p.add_argument("--all", action="store_true", help="with FILE: also the studies of older versions of its functions")
    p.add_argument("--json", action="store_true", help="print the report's data as JSON")
    _wide_arg(p)
    _cache_arg(p)

    p = sub.add_parser("export", help="write the cache (entries and pending records) to a JSON file")
    p.add_argument("path")
    _cache_arg(p)

    p = sub.add_parser("import", help="merge a JSON export into the cache (all or nothing)")
    p.add_argument("path")
    _numbers(p, ("--max-size", nonneg_float, "MIB", "refuse files over MIB mebibytes (default 256)"))
    _cache_arg(p)
    return parser


def subparser(parser: argparse.ArgumentParser, name: str) -> argparse.ArgumentParser:
    """The parser of one subcommand."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return action.choices[name]
    raise KeyError(name)


class _Renamed(argparse._StoreAction):
    """An option with a deprecated second name: the first is the name; the old one still
    works and says so once on stderr."""

    def __call__(self, parser, namespace, values, option_string=None):
        if option_string is not None and option_string != self.option_strings[0]:
            import sys

            print(
                f"autotune: {option_string} is deprecated; use {self.option_strings[0]} (same values).",
                file=sys.stderr,
            )
        setattr(namespace, self.dest, values)


def _emit(action: argparse.Action, value: Any) -> list[str]:
    if not action.option_strings:  # a positional
        return [] if value is None else [str(value)]
    flag = action.option_strings[0 if isinstance(action, _Renamed) else -1]
    if isinstance(action, argparse._StoreTrueAction):
        return [flag] if value else []
    if isinstance(action, argparse._AppendAction):
        return [x for v in value for x in (flag, str(v))]
    return [flag, str(value)]


def repeat_argv(a: argparse.Namespace, command: str = "tune", *, skip: tuple[str, ...] = NOT_FOR_HELPERS) -> list[str]:
    """The arguments that reproduce the parsed ``a`` for ``command``: the subcommand, then
    each option that is not at its default (``skip`` left out), in the parser's order.

    Example::

        >>> a = build_parser().parse_args(["tune", "s.py", "--trials", "4", "--json"])
        >>> repeat_argv(a)
        ['tune', 's.py', '--trials', '4']
    """
    out = [command]
    for action in subparser(build_parser(), command)._actions:
        if action.dest in skip or action.dest == "help" or not hasattr(a, action.dest):
            continue
        value = getattr(a, action.dest)
        if value != action.default:
            out += _emit(action, value)
    return out
