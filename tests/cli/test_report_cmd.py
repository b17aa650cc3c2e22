"""autotune/cli/_report_cmd.py: `autotune report` writes the report and prints each study's table."""

from __future__ import annotations

import json

import pytest
from _report_study import forged_study, tiny_study

from autotune import cli
from autotune.report import FIGURES


@pytest.fixture(scope="module")
def study(tmp_path_factory):
    return tiny_study(tmp_path_factory)


@pytest.mark.slow  # over 4 s: in `make test`, not `make test-fast`
def test_cli_report_on_a_study_file_and_by_name(study, tmp_path, capsys):
    out = tmp_path / "by_file"
    assert cli.main(["report", study["file"], "--storage", study["storage"], "--out", str(out)]) == 0
    text = capsys.readouterr().out
    assert "cheapest for" in text and "wrote" in text and (out / "report.html").is_file()
    assert f"wrote {out / 'report.html'} and 5 figures" in " ".join(text.split())  # a path is never cut
    assert "measurements complete for" in text and "★" in text
    assert sorted(p.name.split("_", 1)[1] for p in out.glob("*.png")) == sorted(f"{f}.png" for f in FIGURES)

    out2 = tmp_path / "by_name"
    argv = [
        "report",
        "--study",
        study["result"].study_name,
        "--storage",
        study["storage"],
        "--out",
        str(out2),
        "--json",
    ]
    assert cli.main(argv) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["html"] == str(out2 / "report.html") and len(data["figures"]) == 5
    assert data["studies"][0]["function_key"] == study["key"]
    assert data["studies"][0]["in_range"] is True


def test_cli_report_errors_say_what_to_do(study, tmp_path, capsys):
    assert cli.main(["report", "--out", str(tmp_path / "x")]) == 2
    assert "--study" in capsys.readouterr().err
    assert cli.main(["report", "--study", "nope", "--storage", study["storage"], "--out", str(tmp_path / "x")]) == 2
    assert "No study 'nope'" in capsys.readouterr().err
    missing = tmp_path / "missing.db"
    assert cli.main(["report", "--study", "s", "--storage", str(missing), "--out", str(tmp_path / "x")]) == 2
    assert "autotune tune" in capsys.readouterr().err and not missing.exists()


@pytest.mark.slow  # over 4 s: in `make test`, not `make test-fast`
def test_cli_report_outside_the_range_prints_the_retune_command(tmp_path_factory, tmp_path, capsys):
    forged = forged_study(tmp_path_factory)
    argv = [
        "report",
        "--study",
        forged["name"],
        "--storage",
        forged["storage"],
        "--out",
        str(tmp_path / "o"),
        "--expected-calls",
        "5000",
    ]
    assert cli.main(argv) == 0
    text = capsys.readouterr().out
    assert "not measured for 5,000 calls" in text and "[0, 2,000]" in text
    assert "autotune tune /studies/forged.py --expected-calls 5000" in text
    assert "l=for ★" in text and "l=scan×1 (default)" in text  # the default owns calls, though off the front
    assert cli.main(argv[:-2]) == 0  # at the tuned 1,000 calls the default is chosen
    assert "l=scan×1 ★ (default)" in capsys.readouterr().out


@pytest.mark.slow  # over 4 s: in `make test`, not `make test-fast`
def test_cli_report_by_function_key_and_every_reason_in_full_with_wide(study, tmp_path, capsys):
    """`report --function KEY` needs no study name; `--wide` is where the CLI shows a trial's
    whole reason (the short form names the trials and says so)."""
    argv = ["report", "--function", study["key"], "--storage", study["storage"], "--out", str(tmp_path / "r")]
    assert cli.main(argv) == 0
    text = capsys.readouterr().out
    assert f"{study['key']} (cost," in text and (tmp_path / "r" / "report.html").is_file()
    assert "timeout (--wide shows each with its full reason)" in " ".join(text.split())
    assert cli.main([*argv, "--wide"]) == 0
    wide = capsys.readouterr().out
    reason = "/tmp/a/very/long/path/to/the/worker_process_that_was_killed_after_it_hung.py was killed"
    assert reason in wide and "smooth=scan×2" in wide  # whole, on one line (stdout is a pipe here)
    assert cli.main(["report", "--function", "tiny_study:smoth", "--storage", study["storage"], "--out", "x"]) == 2
    err = " ".join(capsys.readouterr().err.split())
    assert "No study of 'tiny_study:smoth'" in err and f"functions with studies like it: {study['key']}" in err
