"""Record and replay end to end (autotune/cli/_record.py): real scripts recorded in one
process, `autotune tune --recorded` in another, the script again finds the tuned config;
`autotune pending`; export/import between two caches (laptop -> GPU box)."""

from __future__ import annotations

import json
import re
import shutil
import sys
import textwrap

import pytest
from _cli import on_terminal
from _presets import CLI_FAST, ONE_ROUND_CLI
from _repo import python, repo_env

from autotune.cli import main

APP = textwrap.dedent("""
    import json, sys
    import jax.numpy as jnp
    import autotune as at

    @at.autotuned(expected_calls=5000, static_argnums=(1,))
    def rollout(x, n):
        return at.loop(lambda c, _: (jnp.tanh(c) * 0.9 + 0.1, None), x, length=n, name="steps")[0]

    if __name__ == "__main__":
        x = jnp.linspace(0.0, 1.0, 32)
        rollout(x, 16)
        print(json.dumps({"source": rollout.config_for(x, 16).source}))
""")

MULTI = textwrap.dedent("""
    import jax.numpy as jnp
    import autotune as at

    class Opts:
        def __hash__(self):
            return 0
        def __eq__(self, other):
            return isinstance(other, Opts)

    @at.autotuned(static_argnums=(1,))
    def with_an_option_object_that_json_cannot_hold(x, opts):
        return at.loop(lambda c, _: (c * 0.5, None), x, length=4, name="a")[0]

    @at.autotuned
    def edited_later(x):
        return at.loop(lambda c, _: (c * 0.5, None), x, length=4, name="b")[0]

    if __name__ == "__main__":
        with_an_option_object_that_json_cannot_hold(jnp.ones(4), Opts())
        edited_later(jnp.ones(4))
""")

GONE = textwrap.dedent("""
    import jax.numpy as jnp
    import autotune as at

    @at.autotuned
    def removed(x):
        return at.loop(lambda c, _: (c + 1.0, None), x, length=4, name="c")[0]

    if __name__ == "__main__":
        removed(jnp.ones(4))
""")

TWO_SHAPES = textwrap.dedent("""
    import jax.numpy as jnp
    import autotune as at

    @at.autotuned(expected_calls=5000)
    def smooth(x):
        return at.loop(lambda c, _: (jnp.tanh(c) * 0.9 + 0.1, None), x, length=16, name="steps")[0]

    if __name__ == "__main__":
        smooth(jnp.ones(32))
        smooth(jnp.ones(64))
""")

# Record and replay are the point, not the pick: three trials, the CLI's timing preset, and the
# cheapest contender confirmed beside the default in one round (tests/study/test_confirm.py checks
# confirmation itself).
FAST = ["--trials", "3", *CLI_FAST, *ONE_ROUND_CLI]


def run(args, cwd, env, timeout=400):
    return python(*args, cwd=cwd, env=env, timeout=timeout)


def autotune(args, cwd, env, timeout=400):
    return run(["-m", "autotune", *args], cwd, env, timeout)


def source_of(script, cwd, env) -> str:
    r = run([script], cwd, env)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout.strip().splitlines()[-1])["source"]


def in_pty(args, cwd, env, columns=80) -> str:
    """Run with stdout on a real terminal of ``columns`` columns; the text without escapes."""
    rc, text = on_terminal(
        [sys.executable, "-m", "autotune", *args], cwd=cwd, env=env, columns=columns, rows=50, timeout=120
    )
    assert rc == 0, text
    return re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", text).replace("\r", "")


@pytest.mark.slow
def test_record_tune_recorded_then_the_script_finds_the_config(tmp_path):
    (tmp_path / "app.py").write_text(APP)
    (tmp_path / "elsewhere").mkdir()
    env = repo_env(AUTOTUNE_CACHE=str(tmp_path / "cache.db"))
    assert source_of("app.py", tmp_path, {**env, "AUTOTUNE_RECORD": "1"}) == "default"
    [row] = json.loads(autotune(["pending", "--json"], tmp_path, env).stdout)
    assert row["function_key"] == "app:rollout" and row["location"]["main"] and not row["tuned_here"]
    r = autotune(["tune", "--recorded", *FAST], tmp_path / "elsewhere", env)  # a __main__ script, from its file
    assert r.returncode == 0, r.stderr
    # the same tables as `tune FILE`: the contenders side by side, × for ratios, no stray paragraph
    assert "app:rollout (f32[32], 16): the contenders re-timed side by side, for 5,000 calls" in r.stdout
    assert "winner for app:rollout (f32[32], 16): steps=" in r.stdout and "on synthesized" not in r.stdout
    said = " ".join(r.stdout.split())
    assert re.search(r"\(default [0-9.]+ [µm]?s, [0-9.]+×\)", said) and not re.search(r"\dx\)", said)
    assert f"-> cache sqlite:///{tmp_path / 'cache.db'}" in said  # a path is never shortened in prose
    assert "1 tuned, 0 tuned before, 0 skipped" in r.stdout
    # 80 columns, except a path wider than the page: it stands whole on a line of its own
    assert all(len(line) <= 80 or " " not in line.strip() for line in r.stdout.splitlines()), r.stdout
    # a recorded function is first-class: its sites and its report by key, no study file, no study name
    sites = autotune(["sites", "--function", "app:rollout"], tmp_path / "elsewhere", env)
    assert sites.returncode == 0, sites.stderr
    assert "loop sites of app:rollout (f32[32], 16)" in sites.stdout and "steps" in sites.stdout
    rep = autotune(["report", "--function", "app:rollout", "--out", str(tmp_path / "rep")], tmp_path, env)
    assert rep.returncode == 0, rep.stderr
    assert (tmp_path / "rep" / "report.html").exists() and "app:rollout" in rep.stdout
    nosuch = autotune(["sites", "--function", "app:rollot"], tmp_path, env)
    assert nosuch.returncode == 2 and "recorded functions like it: app:rollout" in nosuch.stderr
    assert source_of("app.py", tmp_path, env) == "cache"
    [row] = json.loads(autotune(["pending", "--json"], tmp_path, env).stdout)
    assert row["tuned_here"]
    best = json.loads(autotune(["best", "--function", "app:rollout", "--json"], tmp_path, env).stdout)
    assert best[0]["retune_command"] == "autotune tune --recorded --function app:rollout --expected-calls 5000"


@pytest.mark.slow
def test_what_cannot_be_replayed_is_skipped_with_one_line_and_the_rest_is_tuned(tmp_path):
    for name, text in (("app.py", APP), ("multi.py", MULTI), ("gone.py", GONE)):
        (tmp_path / name).write_text(text)
    env = repo_env(AUTOTUNE_CACHE=str(tmp_path / "cache.db"))
    for script in ("app.py", "multi.py", "gone.py"):
        r = run([script], tmp_path, {**env, "AUTOTUNE_RECORD": "1"})
        assert r.returncode == 0, r.stderr
    (tmp_path / "gone.py").unlink()
    (tmp_path / "multi.py").write_text(
        MULTI.replace('(c * 0.5, None), x, length=4, name="b"', '(c * 0.25, None), x, length=4, name="b"')
    )
    table = in_pty(["pending"], tmp_path, env)
    assert all(len(line) <= 80 for line in table.splitlines()), table
    wide = autotune(["pending", "--wide"], tmp_path, env)  # through a pipe: one line per row, as promised
    rows = [line for line in wide.stdout.splitlines() if line.startswith(("multi:", "gone:"))]
    assert len(rows) == 3 and all("|cpu|" in line or "cpu|" in line for line in rows), wide.stdout
    assert "to tune" in table and "no [1]" in table
    assert (
        "[1] multi:with_an_option_object_that_json_cannot_hold: argument 1 (opts) is a multi.Opts, which"
        in " ".join(table.split())
    )

    r = autotune(["tune", "--recorded", *FAST], tmp_path, env)
    assert r.returncode == 3, r.stderr  # a partial result: autotune.cli.PARTIAL, not the status of a bug
    skipped = [line for line in r.stderr.splitlines() if line.startswith("skipped")]
    assert len(skipped) == 3, r.stderr
    why = {line.split()[1]: line for line in skipped}
    assert "gone:removed no longer imports (ModuleNotFoundError: No module named 'gone')" in why["gone:removed"]
    assert "the program changed since it was recorded" in why["multi:edited_later"]
    assert (
        "it cannot be replayed: argument 1 (opts) is a multi.Opts"
        in why["multi:with_an_option_object_that_json_cannot_hold"]
    )
    assert "1 tuned, 0 tuned before, 3 skipped" in r.stdout
    assert source_of("app.py", tmp_path, env) == "cache"
    table = in_pty(["pending"], tmp_path, env)
    assert re.search(r"app:rollout .* tuned ", table), table


@pytest.mark.slow
def test_the_second_recorded_signature_of_a_function_starts_from_the_first(tmp_path):
    (tmp_path / "two.py").write_text(TWO_SHAPES)
    env = repo_env(AUTOTUNE_CACHE=str(tmp_path / "cache.db"))
    assert run(["two.py"], tmp_path, {**env, "AUTOTUNE_RECORD": "1"}).returncode == 0
    r = autotune(["tune", "--recorded", *FAST], tmp_path, env)
    assert r.returncode == 0, r.stderr
    said = " ".join(r.stdout.split())
    assert said.count("neighbours: ") == 1, r.stdout  # the second signature's tables only
    assert re.search(r"neighbours: \d configs? of 1 tuned signature \(the nearest 1 doubling away\)", said), said
    # Again (--function: tuned even though covered): both studies are finished, the second still seeded.
    again = autotune(["tune", "--recorded", "--function", "two:smooth", "--json", *FAST], tmp_path, env)
    assert again.returncode == 0, again.stderr
    first, second = json.loads(again.stdout)
    assert (first["short_signature"], second["short_signature"]) == ("(f32[32])", "(f32[64])")
    assert first["seeding"] is None  # the cache held nothing of it yet
    seeding = second["seeding"]
    assert [n["signature"] for n in seeding["neighbours"]] == [first["signature"]]
    assert seeding["neighbours"][0]["distance"] == 1.0 and seeding["seeds"] and seeding["verdict"]
    assert seeding["why"].startswith(("stopped after them", "searched on"))


@pytest.mark.slow
def test_record_on_a_laptop_tune_on_a_gpu_box(tmp_path):
    """Two caches, an export file between them, and the script at another path on the box."""
    laptop, box = tmp_path / "laptop", tmp_path / "box"
    laptop.mkdir()
    box.mkdir()
    (laptop / "app.py").write_text(APP)
    on_laptop = repo_env(AUTOTUNE_CACHE=str(laptop / "a.db"))
    assert source_of("app.py", laptop, {**on_laptop, "AUTOTUNE_RECORD": "values"}) == "default"
    r = autotune(["export", str(tmp_path / "recorded.json")], laptop, on_laptop)
    assert r.returncode == 0 and "1 pending records" in r.stdout, r.stdout + r.stderr

    shutil.copy(laptop / "app.py", box / "app.py")
    shutil.rmtree(laptop)  # the recorded file path does not exist on the box
    on_box = repo_env(AUTOTUNE_CACHE=str(box / "b.db"))
    r = autotune(["import", str(tmp_path / "recorded.json")], box, on_box)
    assert r.returncode == 0 and "1 pending records" in r.stdout, r.stdout + r.stderr
    [row] = json.loads(autotune(["pending", "--json"], box, on_box).stdout)
    assert row["values_stored"] and not row["tuned_here"]

    r = autotune(["tune", "--recorded", "--json", "--timing", "blocking", *FAST], box, on_box)  # found from the cwd
    assert r.returncode == 0, r.stderr
    [done] = json.loads(r.stdout)
    assert done["status"] == "tuned" and done["inputs"] == "recorded values" and done["function"] == "app:rollout"
    assert done["timing"] == "blocking"  # --timing reaches a recorded function's study too
    assert source_of("app.py", box, on_box) == "cache"


def test_nothing_recorded_and_bad_options(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("AUTOTUNE_CACHE", str(tmp_path / "empty.db"))
    assert main(["tune", "--recorded"]) == 1
    assert "No recorded signatures in sqlite:///" in capsys.readouterr().err
    assert main(["tune", "--recorded", "--function", "app:nope"]) == 1
    assert "No recorded signatures of app:nope" in capsys.readouterr().err
    assert main(["tune", "--recorded", "--workers", "2"]) == 2
    assert "--workers does not combine with --recorded" in capsys.readouterr().err
    assert main(["pending"]) == 0
    assert "No recorded signatures" in capsys.readouterr().out
    assert main(["pending", "--json"]) == 0 and json.loads(capsys.readouterr().out) == []
