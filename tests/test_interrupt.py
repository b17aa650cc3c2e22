"""The one interrupt latch: SIGINT, SIGTERM and SIGHUP end a study as cleanly as Ctrl-C."""

import os
import select
import signal
import subprocess
import sys
import time

import optuna
import pytest
from _optuna_study import STUDY, wait_for_running
from _presets import ONE_ROUND_CLI
from _procs import default_disposition
from _repo import repo_env

from autotune._interrupt import Interrupted, InterruptLatch, check, current


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM, signal.SIGHUP])
def test_the_first_signal_is_latched_and_wakes_a_waiter_the_second_raises_at_once(sig):
    with default_disposition(sig):
        before = signal.getsignal(sig)
        with InterruptLatch() as latch:
            assert current() is latch
            os.kill(os.getpid(), sig)
            ready, _, _ = select.select([latch.wakeup_fd], [], [], 5)
            assert ready and latch.requested  # latched, not raised
            with pytest.raises(Interrupted) as info:
                check()
            assert info.value.signum == sig and info.value.exit_code == 128 + sig
            assert not select.select([latch.wakeup_fd], [], [], 0)[0]  # drained: the next wait blocks again
            os.kill(os.getpid(), sig)
            with pytest.raises(Interrupted):
                os.kill(os.getpid(), sig)  # a second signal before the check: raised immediately
                time.sleep(1)  # never finishes when it works: os.kill runs the handler before returning
        assert current() is None
        assert signal.getsignal(sig) == before  # given back


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGHUP])
def test_an_ignored_signal_stays_ignored(sig):
    """Under ``nohup`` (SIGHUP) or in a script's background job (SIGINT) the signal is ignored on
    purpose: tuning must go on through a dropped ssh session, not stop."""
    previous = signal.signal(sig, signal.SIG_IGN)
    try:
        with InterruptLatch() as latch:
            assert signal.getsignal(sig) == signal.SIG_IGN
            os.kill(os.getpid(), sig)
            time.sleep(0.2)  # an absence has no event to wait on: a short margin for a handler to (wrongly) run
            assert not latch.requested
            check()  # nothing to raise
        assert signal.getsignal(sig) == signal.SIG_IGN
    finally:
        signal.signal(sig, previous)


def test_an_applications_own_handler_is_left_alone():
    mine = lambda *_: None  # noqa: E731
    previous = signal.signal(signal.SIGTERM, mine)
    try:
        with InterruptLatch():
            assert signal.getsignal(signal.SIGTERM) is mine
    finally:
        signal.signal(signal.SIGTERM, previous)


@pytest.mark.slow
@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGHUP])
def test_cli_tune_ended_by_a_signal_keeps_every_completed_trial_and_resumes(tmp_path, sig):
    (tmp_path / "slowstudy.py").write_text(STUDY)
    storage = str(tmp_path / "studies.db")
    cmd = [
        sys.executable,
        "-m",
        "autotune",
        "tune",
        str(tmp_path / "slowstudy.py"),
        "--storage",
        storage,
        "--cache",
        str(tmp_path / "cache.db"),
        "--sampler",
        "grid",
        "--run-seconds",
        "0.01",
        *ONE_ROUND_CLI,
    ]
    env = repo_env()
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        name, number = wait_for_running(storage, proc)
        proc.send_signal(sig)
        out, err = proc.communicate(timeout=300)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 128 + sig, err[-2000:]
    assert f"interrupted ({signal.Signals(sig).name})" in err
    study = optuna.load_study(study_name=name, storage="sqlite:///" + storage)
    assert not [t for t in study.trials if t.state.name == "RUNNING"]
    done = [t for t in study.trials if t.state.name == "COMPLETE"]
    assert done and all(t.user_attrs["outcome"] in ("complete", "shared") for t in done)
    # The same command resumes: every config is measured once, the interrupted one too.
    rc = subprocess.run(cmd + ["--json"], env=env, capture_output=True, text=True, timeout=600)
    assert rc.returncode == 0, rc.stderr[-2000:]
    study = optuna.load_study(study_name=name, storage="sqlite:///" + storage)
    kept = [t for t in study.trials if t.user_attrs.get("outcome") not in ("interrupted", "abandoned", "duplicate")]
    configs = [t.user_attrs["config"] for t in kept]
    assert len(configs) == len(set(configs)) == int(study.user_attrs["space_size"])
