"""autotune/cli/_tune_cmd.py: real tunes through real subprocesses and a real pseudo-terminal.

One tune, and every reader of its result (the summary, the ★ rows, the progress bar's last
line, `best`, `best --expected-calls N`, the report's JSON and HTML) names the same winner;
every command fits 80 columns; --json is alone on stdout; passwords are never shown.
"""

from __future__ import annotations

import json
import math
import re
import shutil

import pytest
from _cli import STUDY, cli_env, run, run_in_pty, too_long, visible_lines
from _presets import CLI_FAST, ONE_ROUND_CLI
from _repo import ROOT

import autotune as at
from autotune import _display
from autotune import select as _select
from autotune.cli._tables import SiteNames
from autotune.program._config import Config

pytestmark = pytest.mark.slow
SECRET = "s3cret-hunter22"


@pytest.fixture(scope="module")
def tuned(tmp_path_factory):
    """`autotune tune tiny_study.py` at a (wide) terminal, once for the module, and what `best
    --json` says of it (read once: the tests only read it)."""
    folder = tmp_path_factory.mktemp("tuned")
    (folder / "tiny_study.py").write_text(STUDY)
    env = cli_env(folder)
    status, out = run_in_pty("tune", "tiny_study.py", *CLI_FAST, cwd=folder, env=env, columns=200)
    assert status == 0, out[-4000:]
    tuned = {"folder": folder, "env": env, "lines": visible_lines(out)}
    return {**tuned, "entry": best_json(tuned)}


def best_json(tuned, *args: str) -> dict:
    r = run("best", "--json", *args, cwd=tuned["folder"], env=tuned["env"])
    assert r.returncode == 0, r.stderr
    (entry,) = json.loads(r.stdout)
    return entry


def test_every_reader_names_the_same_winner(tuned):
    lines = tuned["lines"]
    entry = tuned["entry"]
    names = SiteNames().add([{"id": sid, **site} for sid, site in entry["sites"].items()])
    label, cost = names.config(entry["config"]), _display.cost(entry["cost"])
    # The summary line and the ★ of both tables.
    assert any(line.startswith(f"winner for tiny_study:smooth: {label} cost {cost} ") for line in lines), lines[-30:]
    starred = [line.split("★")[0].strip() for line in lines if "★" in line and "winner:" not in line]
    assert starred and set(starred) == {label}, starred
    # Where the run's wall went: a row per part, and the total.
    assert any(line.startswith("where the ") and line.endswith(" went") for line in lines), lines[-30:]
    assert any(line.startswith("total ") for line in lines), lines[-30:]
    # The progress bar's last status, in the notation it uses.
    finals = [m for line in lines for m in re.findall(r"winner (.+?) at (\S+) s$", line)]
    assert finals, lines[-30:]
    sites = [{"id": sid, "name": sid if s["kind"] == "loop" else None} for sid, s in entry["sites"].items()]
    assert finals[-1] == (Config.from_dict(entry["config"]).label(sites), f"{entry['cost']:.4g}")
    # The report: JSON and HTML.
    out = tuned["folder"] / "report"
    r = run("report", "tiny_study.py", "--out", str(out), "--json", cwd=tuned["folder"], env=tuned["env"])
    assert r.returncode == 0, r.stderr
    (study,) = json.loads(r.stdout)["studies"]
    assert study["chosen"]["config"] == entry["config"] and study["chosen"]["cost"] == pytest.approx(entry["cost"])
    assert f"<b>{Config.from_dict(entry['config']).label(study['sites'])}</b>" in (out / "report.html").read_text()


def test_best_at_the_tuned_call_count_and_next_to_it(tuned):
    entry = tuned["entry"]
    n = entry["objective"]["expected_calls"]
    assert best_json(tuned, "--expected-calls", f"{n:g}")["config"] == entry["config"]
    crossovers = [
        {**it, "to_calls": float("inf") if it["to_calls"] is None else it["to_calls"]} for it in entry["crossovers"]
    ]
    for m in (n - 1, n + 1):
        picked = best_json(tuned, "--expected-calls", f"{m:g}")["config"]
        assert picked == _select.best_at(crossovers, m)  # the re-pick follows the intervals exactly
        if not any(min(n, m) < it["from_calls"] <= max(n, m) for it in crossovers):
            assert picked == entry["config"]  # no crossover in between: the same winner


def test_every_command_fits_80_columns_at_a_terminal(tuned, tmp_path):
    for name in ("cache.db", "studies.db", "tiny_study.py"):
        shutil.copy(tuned["folder"] / name, tmp_path / name)
    env = cli_env(tmp_path)
    top = tuned["entry"]["complete_range"]["to_calls"]  # None: complete for every call count
    far = 1e9 if top is None else math.ceil(10 * top)  # a whole count: the re-tune command names it as given
    for args in (
        ("tune", "tiny_study.py", *CLI_FAST),
        ("sites", "tiny_study.py"),
        ("best",),
        ("best", "--expected-calls", f"{far:g}"),
        ("list",),
        ("report", "tiny_study.py", "--out", "rep"),
        ("pending",),
    ):
        status, out = run_in_pty(*args, cwd=tmp_path, env=env, columns=80)
        assert status in (0, 2), out[-3000:]  # 2: `pending` before record-and-replay lands
        assert too_long(out) == [], (args, too_long(out))
        if args[:2] == ("best", "--expected-calls"):  # outside the range: said, with the command that re-tunes
            text = " ".join("\n".join(visible_lines(out)).replace(" \\\n", " ").split())
            assert ("not measured for" in text) == (top is not None), text
            assert top is None or f"--expected-calls {far:.0f}" in text, text


def test_through_a_pipe_the_layout_is_the_same_and_wide_keeps_rows_whole(tuned):
    r = run("best", cwd=tuned["folder"], env=tuned["env"])
    assert r.returncode == 0 and max(len(line) for line in r.stdout.splitlines()) <= 80
    r = run("best", "--wide", cwd=tuned["folder"], env=tuned["env"])
    entry = tuned["entry"]
    (row,) = [line for line in r.stdout.splitlines() if entry["device_key"] in line]
    assert row.startswith("tiny_study:smooth ") and entry["signature"] in row


def test_json_is_alone_on_stdout_though_the_function_prints(tmp_path):
    (tmp_path / "tiny_study.py").write_text(STUDY)
    r = run("tune", "tiny_study.py", "--json", "--trials", "1", *CLI_FAST, cwd=tmp_path, env=cli_env(tmp_path))
    assert r.returncode == 0, r.stderr
    (res,) = json.loads(r.stdout)
    assert "study file imported" in r.stderr and "tracing smooth" in r.stderr
    assert res["function"] == "tiny_study:smooth" and res["trials"][0]["config"] == {
        "smooth": {"repr": "scan", "unroll": 1}
    }
    rng = res["complete_range"]  # one trial of a space of 5: only the tuned call count is decided
    assert res["in_range"] is True and rng["from_calls"] == rng["to_calls"] == 100 and "never measured" in rng["why"]
    assert res["storage"] == f"sqlite:///{tmp_path / 'studies.db'}"
    wall = res["wall"]  # where the run's seconds went: the stages, per part
    assert wall["by_stage"]["timing"] > 0 and wall["by_stage"]["compile"] > 0
    assert {"setup", "search", "confirmation"} <= set(wall["parts"])
    for part, stages in wall["by_part"].items():
        assert sum(stages.values()) == pytest.approx(wall["parts"][part], abs=0.01), part


def test_the_timing_flag_reaches_the_study_and_the_output_says_what_was_charged(tmp_path):
    (tmp_path / "tiny_study.py").write_text(STUDY)
    args = ("tune", "tiny_study.py", "--trials", "1", "--timing", "blocking", *CLI_FAST, *ONE_ROUND_CLI)
    r = run(*args, "--json", cwd=tmp_path, env=cli_env(tmp_path))
    assert r.returncode == 0, r.stderr
    (res,) = json.loads(r.stdout)
    assert res["timing"] == "blocking"
    measured = [t["measurement"] for t in res["trials"] if t.get("measurement")]
    measured += [p["measurement"] for p in res["confirmed"] if p.get("measurement")]
    assert measured and {m["timing"] for m in measured} == {"blocking"}


def test_the_summary_says_how_the_runtime_was_timed(tuned):
    assert "runtime: the steady state of back-to-back calls" in tuned["lines"], tuned["lines"][-30:]


def test_function_filters_the_examples(tmp_path):
    (tmp_path / "tiny_study.py").write_text(STUDY)
    r = run("tune", "tiny_study.py", "--function", "tiny_study:nope", cwd=tmp_path, env=cli_env(tmp_path))
    assert r.returncode == 2 and "has no example of function 'tiny_study:nope'" in r.stderr
    assert "['tiny_study:smooth']" in r.stderr


def test_a_password_in_the_storage_or_cache_url_is_never_shown(tmp_path, pg_url):
    url = pg_url.replace("postgresql://postgres@", f"postgresql://postgres:{SECRET}@")  # trust auth ignores it
    assert url != pg_url
    (tmp_path / "tiny_study.py").write_text(STUDY)
    env = cli_env(tmp_path)
    common = ("--trials", "1", *CLI_FAST, "--storage", url, "--cache", url)
    r = run("tune", "tiny_study.py", "--json", *common, cwd=tmp_path, env=env)
    assert r.returncode == 0, r.stderr[-3000:]
    assert SECRET not in r.stdout + r.stderr
    (res,) = json.loads(r.stdout)
    assert "postgres:***@" in res["storage"] and "postgres:***@" in res["cache"]
    # --reconfirm: a finished study would stop before naming the cache (that is tested elsewhere).
    r = run("tune", "tiny_study.py", "--wide", "--reconfirm", *common, cwd=tmp_path, env=env)
    assert r.returncode == 0 and SECRET not in r.stdout + r.stderr
    assert re.search(r"(stored in the cache|the cache) postgresql(\+psycopg)?://postgres:\*\*\*@", r.stdout), r.stdout
    r = run("report", "--study", res["study"], "--storage", url, "--out", "rep", cwd=tmp_path, env=env)
    assert r.returncode == 0, r.stderr[-3000:]
    for name in ("report.html", "report.json"):
        text = (tmp_path / "rep" / name).read_text()
        assert SECRET not in text and "postgres:***@" in text
    r = run("best", "--cache", url, "--json", cwd=tmp_path, env=env)
    assert SECRET not in r.stdout
    assert "--cache 'postgresql://postgres:***@" in json.loads(r.stdout)[0]["retune"]  # the user puts it back


def test_the_summary_says_when_a_challenger_was_measured_again_in_a_second_worker(tmp_path):
    """A real tune whose runner gives every challenger a 5% runtime lead in both processes."""
    import types

    import jax.numpy as jnp
    from _fake_runner import FakeRunner
    from rich.console import Console

    import autotune as at
    from autotune.cli._tune_cmd import show_result
    from autotune.program._space import Space

    def loop8(x):
        return at.loop(lambda c, _: (jnp.sin(c) * 0.5 + 1.0, None), x, length=8, name="l")[0]

    x = jnp.ones(4)
    default = Space(at.sites(loop8, x)).default()  # the study's default, spelled out
    lead = {0: 0.95e-3, 1: 0.96e-3}  # every challenger's runtime in the first process and in the second
    runner = FakeRunner(loop8, (x,), lambda name, process: (0.1, 1e-3 if name == default.label() else lead[process]))
    r = at.tune(
        loop8,
        x,
        runner=runner,
        n_trials=3,
        sampler="grid",
        xla=False,
        expected_calls=1e6,
        storage=str(tmp_path / "s.db"),
        progress=False,
    )
    assert r.default_config == default and runner.renewed == 1 and r.best_config != default
    assert any(p.worker_processes == 2 for p in r.confirmed)
    out = Console(record=True, width=100)
    show_result(out, types.SimpleNamespace(key="test:loop8", cache=types.SimpleNamespace(display_url="c.db")), r)
    assert "measured again in a second, fresh one" in out.export_text()


def test_the_space_line_says_the_xla_options_were_tried_on_the_best_loop_configs(tmp_path):
    """`autotune tune --xla on --sampler grid` measures the loop configs, then the options on the
    best few (not every loop config times every option), and says so."""
    import jax

    from autotune.program._xla import choices, offered
    from autotune.study._xla_search import XLA_TOP

    (tmp_path / "tiny_study.py").write_text(STUDY)
    env = cli_env(tmp_path)
    args = ("tune", "tiny_study.py", "--xla", "on", "--sampler", "grid", *CLI_FAST, *ONE_ROUND_CLI)
    status, out = run_in_pty(*args, cwd=tmp_path, env=env, columns=200)
    assert status == 0, out[-4000:]
    loops = 5  # the tiny study's loop of 4 steps: scan×1, scan×2, for, fori×1, fori×2
    stage = XLA_TOP * (len(choices(offered("cpu", jax.devices()[0].device_kind)[0])) - 1)
    want = f"{loops + stage} trials (grid over a space of {loops + stage}: {loops} loop configs, then {stage} with XLA"
    assert any(line.startswith(want) for line in visible_lines(out)), visible_lines(out)[-30:]


def _entries(folder):
    import sqlite3

    with sqlite3.connect(folder / "cache.db") as db:
        return db.execute("SELECT * FROM autotune_entries").fetchall()


def test_a_finished_study_says_so_stops_and_keeps_its_entry(tmp_path):
    (tmp_path / "tiny_study.py").write_text(STUDY)
    env = cli_env(tmp_path)
    args = ("tune", "tiny_study.py", "--trials", "3", *CLI_FAST)
    r = run(*args, "--json", cwd=tmp_path, env=env)
    assert r.returncode == 0, r.stderr[-3000:]
    (first,) = json.loads(r.stdout)
    row = _entries(tmp_path)
    assert first["finished"] is False and first["new_trials"] == 3 and first["stored"] == "written"
    status, out = run_in_pty(*args, cwd=tmp_path, env=env, columns=100)
    lines = visible_lines(out)
    assert status == 0, out[-3000:]
    assert any("tiny_study:smooth: finished, nothing new to measure (3 trials" in ln for ln in lines), lines
    assert not any("confirming" in ln or "re-timed side by side" in ln for ln in lines), lines
    bars = [ln for ln in lines if ln.startswith("tuning ")]
    assert bars and all(" 0/3 " not in ln for ln in bars) and any(" 3/3 " in ln for ln in bars), bars
    assert _entries(tmp_path) == row  # not rewritten, not even with the same values
    r = run(*args, "--json", "--reconfirm", cwd=tmp_path, env=env)
    assert r.returncode == 0, r.stderr[-3000:]
    (again,) = json.loads(r.stdout)
    assert again["finished"] is False and again["new_trials"] == 0 and again["confirmed"] != first["confirmed"]
    assert [t["number"] for t in again["trials"]] == [t["number"] for t in first["trials"]]
    assert (again["stored"] == "kept") == (again["best_config"] == first["best_config"])
    assert (_entries(tmp_path) == row) == (again["stored"] == "kept")


def test_a_second_shape_says_which_neighbours_seeded_it_and_json_keeps_it(tmp_path):
    (tmp_path / "tiny_study.py").write_text(STUDY)
    (tmp_path / "wider.py").write_text(
        "import jax.numpy as jnp\nfrom tiny_study import smooth\n\n\ndef examples():\n"
        "    return [(smooth, (jnp.zeros(16),))]\n"
    )
    env = cli_env(tmp_path)
    fast = ("--trials", "4", *CLI_FAST, *ONE_ROUND_CLI)
    r = run("tune", "tiny_study.py", "--json", *fast, cwd=tmp_path, env=env)
    assert r.returncode == 0, r.stderr[-3000:]
    (first,) = json.loads(r.stdout)
    assert first["seeding"] is None
    status, out = run_in_pty("tune", "wider.py", *fast, cwd=tmp_path, env=env, columns=100)
    assert status == 0, out[-3000:]
    said = " ".join(" ".join(visible_lines(out)).split())
    assert "neighbours: " in said and "of 1 tuned signature (the nearest 1 doubling away) measured after" in said
    assert "stopped after them: the neighbour's winner smooth=" in said or "searched on" in said
    r = run("tune", "wider.py", "--json", *fast, cwd=tmp_path, env=env)  # finished: its seeding kept
    assert r.returncode == 0, r.stderr[-3000:]
    (second,) = json.loads(r.stdout)
    seeding = second["seeding"]
    assert second["finished"] and seeding["neighbours"][0]["signature"].endswith("float32[8]")
    assert [t["config"] for t in second["trials"][: 1 + len(seeding["seeds"])]][1:] == seeding["seeds"]
    assert seeding["why"] in said  # the line's own sentence (an at.loop's site id is its name)


def test_search_flag_and_its_deprecated_name_objective(capsys):
    from autotune.cli._parser import build_parser, repeat_argv

    a = build_parser().parse_args(["tune", "s.py", "--search", "pareto"])
    assert a.search == "pareto" and "deprecated" not in capsys.readouterr().err
    old = build_parser().parse_args(["tune", "s.py", "--objective", "pareto"])
    assert old.search == "pareto"
    assert "--objective is deprecated; use --search" in capsys.readouterr().err
    assert repeat_argv(old)[-2:] == ["--search", "pareto"]  # helpers and re-tune commands use the name


def test_tune_options_are_built_once_from_the_flags():
    from autotune.cli._parser import build_parser, repeat_argv
    from autotune.cli._tune_cmd import tune_options

    a = build_parser().parse_args(["tune", "s.py", "--trials", "5", "--search", "pareto", "--trial-memory", "2"])
    opts = tune_options(a)
    assert opts == at.TuneOptions(n_trials=5, search="pareto", trial_memory_gb=2.0)
    a = build_parser().parse_args(["tune", "s.py", "--timing", "device", "--run-seconds", "0.1"])
    assert tune_options(a).timing.to_dict() == {"mode": "device", "target_s": 0.1}
    assert tune_options(build_parser().parse_args(["tune", "s.py", "--timing", "blocking"])).timing_mode == "blocking"
    alone = build_parser().parse_args(["tune", "s.py", "--no-neighbours"])
    assert tune_options(alone) == at.TuneOptions(neighbours=False) and "--no-neighbours" in repeat_argv(alone)
    assert tune_options(build_parser().parse_args(["tune", "s.py"])).neighbours is True


def test_tier_up_flag_is_a_tune_option_and_repeats_for_helpers():
    from autotune.cli._parser import build_parser, repeat_argv
    from autotune.cli._tune_cmd import tune_options

    a = build_parser().parse_args(["tune", "s.py", "--tier-up"])
    assert tune_options(a) == at.TuneOptions(tier_up=True)
    assert "--tier-up" in repeat_argv(a)
    assert tune_options(build_parser().parse_args(["tune", "s.py"])).tier_up is False


def test_tier_up_tunes_for_the_tiered_cost_and_best_json_reports_it(tmp_path):
    (tmp_path / "tiny_study.py").write_text(STUDY)
    env = cli_env(tmp_path)
    args = ("tune", "tiny_study.py", "--trials", "1", "--tier-up", "--json", *CLI_FAST, *ONE_ROUND_CLI)
    r = run(*args, cwd=tmp_path, env=env)
    assert r.returncode == 0, r.stderr
    (res,) = json.loads(r.stdout)
    assert res["objective"]["tier_up"] is True and res["study"].endswith(",tier")
    assert "tiered_cost" in res  # None: one trial, the default wins
    r = run("best", "--json", cwd=tmp_path, env=env)
    assert r.returncode == 0, r.stderr
    (entry,) = json.loads(r.stdout)
    assert entry["objective"]["tier_up"] is True and "tiered_cost" in entry


SLOW_FOR_STUDY = """
import jax.numpy as jnp
import autotune as at

def body(c, _):
    for _ in range(12):  # written out 8 times (`for`), it compiles several times longer than the scan
        c = jnp.sin(c) * 0.9 + 0.1 * jnp.cos(c * 1.1)
    return c, None

@at.autotuned(expected_calls=1000)
def smooth(x):
    return at.loop(body, x, length=8, name="l")[0]

def examples():
    return [(smooth, (jnp.ones(8),))]
"""


def test_tier_up_says_the_measured_slowdown_and_json_keeps_it_on_the_defaults_point(tmp_path):
    (tmp_path / "slow_for.py").write_text(SLOW_FOR_STUDY)
    env = cli_env(tmp_path)
    # the whole grid confirmed in one round, so `for` (which qualifies for tier-up) is among the points
    # the loop configs alone (--xla off): XLA's stage, where "auto" takes it (jax 0.12), would take trials from them
    args = (
        "tune",
        "slow_for.py",
        "--tier-up",
        "--xla",
        "off",
        "--confirm-top",
        "16",
        "--confirm-rounds",
        "1",
        *CLI_FAST,
    )
    r = run(*args, "--wide", cwd=tmp_path, env=env)
    assert r.returncode == 0, r.stderr
    (line,) = [ln for ln in r.stdout.splitlines() if "tier-up: the default's calls ran" in ln]
    shown = float(re.search(r"ran ([0-9.]+)x slower", line).group(1))
    stretch = float(re.search(r"a compile took ([0-9.]+)x longer beside them", line).group(1))
    r = run("best", "--json", cwd=tmp_path, env=env)
    assert r.returncode == 0, r.stderr
    (entry,) = json.loads(r.stdout)
    (theirs,) = [p for p in entry["pareto"] if p["config"] == entry["default_config"]]
    assert theirs["slowdown"] >= 1.0 and round(theirs["slowdown"], 2) == shown
    assert theirs["compile_slowdown"] >= 1.0 and round(theirs["compile_slowdown"], 2) == stretch


def test_a_config_over_the_trial_memory_fails_in_one_line_and_the_winner_fits(tmp_path):
    """scripts/tpu_oom.py at its CPU sizes: ``for`` asks for 1 GiB (16 steps of a 64 MiB buffer,
    all live at once when unrolled), scan×1 for 64 MiB; the worker is capped at 0.75 GiB."""
    import optuna

    script = ROOT / "scripts" / "tpu_oom.py"
    env = cli_env(tmp_path, AUTOTUNE_OOM_SIZE="cpu")
    args = ("tune", str(script), "--trial-memory", "0.75", "--trials", "5", "--storage", str(tmp_path / "s.db"))
    r = run(*args, "--wide", *CLI_FAST, *ONE_ROUND_CLI, cwd=tmp_path, env=env)
    assert r.returncode == 0, r.stderr[-3000:]
    lines = r.stdout.splitlines()
    at_for = lines.index(next(ln for ln in lines if ln.strip().startswith("#") and ln.endswith("oom: steps=for")))
    assert (
        lines[at_for + 1]
        .strip()
        .startswith(
            "ran out of memory while running: the config asks for 1.00 GiB of device memory, "
            "the worker's limit is 0.75 GiB (trial_memory_gb; "
        )
    ), lines[at_for : at_for + 3]
    (winner,) = [ln for ln in lines if ln.startswith("winner for tpu_oom:unrolls_grow: ")]
    label = winner.split(": ", 1)[1].split(" cost ")[0]
    (summary,) = optuna.study.get_all_study_summaries(f"sqlite:///{tmp_path / 's.db'}")
    study = optuna.load_study(study_name=summary.study_name, storage=f"sqlite:///{tmp_path / 's.db'}")
    trials: dict[str, list] = {}  # every trial of each config (one config may have several)
    for t in study.trials:
        trials.setdefault(str(at.Config.from_json(t.user_attrs["config"])), []).append(t)
    for failed in trials["steps=for"]:
        reason = failed.user_attrs.get("reason")
        assert (failed.state, failed.user_attrs.get("outcome")) == (optuna.trial.TrialState.FAIL, "oom"), reason
        assert reason in lines[at_for + 1], reason
    # Which config wins is the CPU's timing (fori×2 and scan×2 ask the same 128 MiB); the claim
    # is that it ran, and fits under the cap.
    ran = [t.user_attrs for t in trials[label] if t.user_attrs.get("outcome") == "complete"]
    assert ran and all(0 < a.get("memory_bytes") <= 0.75 * 2**30 for a in ran), (winner, trials[label])


def test_max_memory_reaches_the_study_the_json_the_tables_and_best(tmp_path):
    (tmp_path / "tiny_study.py").write_text(STUDY)
    env = cli_env(tmp_path)
    args = ("tune", "tiny_study.py", "--trials", "2", "--max-memory", "10B", *CLI_FAST, *ONE_ROUND_CLI)
    r = run(*args, "--json", cwd=tmp_path, env=env)
    assert r.returncode == 0, r.stderr
    (res,) = json.loads(r.stdout)
    assert res["max_memory"] == 10 and res["objective"]["max_memory"] == 10 and res["study"].endswith(",mem<=10")
    assert res["memory_bytes"] > 10  # nothing this small: no config fits, so the default stays
    default = next(t for t in res["trials"] if t["number"] == 0)
    assert res["best_config"] == default["config"] and all(t["memory_bytes"] > 10 for t in res["trials"])
    assert all(p["memory_bytes"] > 10 for p in res["confirmed"])
    r = run(*args, "--reconfirm", cwd=tmp_path, env=env)  # the tables, at a pipe
    assert r.returncode == 0, r.stderr
    text = " ".join(r.stdout.split())
    assert "memory budget 10 B: no config measured fits it, so the default" in text and "memory" in text
    r = run("best", "--json", cwd=tmp_path, env=env)
    (entry,) = json.loads(r.stdout)
    assert entry["max_memory"] == 10 and entry["memory_bytes"] == res["memory_bytes"]
    assert entry["device_key"].endswith("|max_memory=10")
    r = run("best", cwd=tmp_path, env=env)
    assert "memory" in r.stdout and "budget" in r.stdout and "10 B" in r.stdout


def test_a_fraction_of_the_memory_is_refused_where_the_device_reports_none(tmp_path):
    (tmp_path / "tiny_study.py").write_text(STUDY)
    r = run("tune", "tiny_study.py", "--trials", "1", "--max-memory", "0.5", cwd=tmp_path, env=cli_env(tmp_path))
    assert r.returncode != 0
    assert "fraction of the device's memory, but this device reports none" in r.stderr and "4GiB" in r.stderr
