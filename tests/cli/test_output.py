"""autotune/cli/_output.py: JSON alone on stdout, the width policy, commands that paste."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import pytest
from _cli import cli_env
from _repo import ROOT

from autotune.cli._output import WIDE_PIPE_WIDTH, shell_lines

NOISY = textwrap.dedent("""
    import os, subprocess, sys
    from autotune.cli._output import emit_json, stdout_to_stderr
    with stdout_to_stderr():
        print("python print")
        os.write(1, b"fd 1 write\\n")
        subprocess.run([sys.executable, "-c", "print('child process')"])
    emit_json({"ok": True})
""")


def test_while_redirected_nothing_but_the_json_reaches_stdout(tmp_path):
    r = subprocess.run(
        [sys.executable, "-c", NOISY], env=cli_env(tmp_path), capture_output=True, text=True, timeout=120, cwd=ROOT
    )
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout) == {"ok": True}
    for line in ("python print", "fd 1 write", "child process"):
        assert line in r.stderr


WIDTHS = "from autotune.cli._output import console; print(console().width, console(wide=True).width)"


@pytest.mark.parametrize("columns, expected", [(None, (80, WIDE_PIPE_WIDTH)), ("100", (100, WIDE_PIPE_WIDTH))])
def test_a_pipe_gets_the_80_column_layout_and_wide_gets_one_line_a_row(tmp_path, columns, expected):
    env = cli_env(tmp_path, **({"COLUMNS": columns} if columns else {}))
    r = subprocess.run([sys.executable, "-c", WIDTHS], env=env, capture_output=True, text=True, timeout=120)
    assert tuple(int(x) for x in r.stdout.split()) == expected, r.stderr


@pytest.mark.parametrize("width", [30, 50, 80])
def test_a_long_command_is_split_into_lines_that_paste_as_one(width):
    command = (
        "autotune tune /tmp/pytest-of-me/pytest-7/test_x0/tiny_study.py --run-seconds 0.02 --expected-calls 10000000"
    )
    lines = shell_lines(command, width)
    assert all(len(line) <= width or len(line.removesuffix(" \\").split()) == 1 for line in lines)
    assert all(line.endswith(" \\") for line in lines[:-1])
    assert " ".join(line.removesuffix(" \\").strip() for line in lines) == command
