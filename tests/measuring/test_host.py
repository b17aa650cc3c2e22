"""autotune.measuring._host: one process owns the device; the tuning parent traces and lowers on the CPU.

The CPU admits many processes, so these tests run on a host device that admits one, as libtpu
does with a TPU chip (tests/fixtures/exclusive_device: a second process that opens JAX's devices
without being pinned to the CPU fails with libtpu's words). Before the tuning parent pinned
itself, every worker died there and every trial ran in the parent, without isolation.
"""

from __future__ import annotations

import json
import textwrap

import pytest
from _exclusive import exclusive_env
from _repo import ROOT, python, repo_env


def script(tmp_path, body: str) -> str:
    path = tmp_path / "prog.py"
    path.write_text(textwrap.dedent(body))
    return str(path)


@pytest.mark.slow  # over 3.4 s: in `make test`, not `make test-fast`
def test_the_exclusive_device_refuses_a_second_process_and_admits_cpu_only_ones(tmp_path):
    prog = script(
        tmp_path,
        """
        import os, subprocess, sys
        import jax.numpy as jnp
        jnp.ones(2).block_until_ready()  # this process holds the device now
        second = subprocess.run([sys.executable, "-c", "import jax; jax.devices()"], capture_output=True, text=True)
        cpu = subprocess.run([sys.executable, "-c", "import jax; jax.devices()"], capture_output=True, text=True,
                             env=dict(os.environ, JAX_PLATFORMS="cpu"))
        print(second.returncode, "already in use" in second.stderr, cpu.returncode)
        """,
    )
    r = python(prog, env=exclusive_env(tmp_path))
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == ["1", "True", "0"]


@pytest.mark.slow  # over 3.4 s: in `make test`, not `make test-fast`
def test_pin_leaves_the_device_to_workers_and_learns_it_from_them(tmp_path):
    prog = script(
        tmp_path,
        """
        import json
        import jax, jax.numpy as jnp
        from autotune.measuring import _host
        from autotune.program import _keys
        from autotune.measuring.process import WorkerRunner
        import autotune as at

        assert _host.pin() and _host.pinned()
        x = jnp.ones(8)  # the parent's arrays live on its CPU; it opens no device
        f = lambda x: at.loop(lambda c, _: (c * 0.5 + 1.0, None), x, length=8, name="l")[0]
        with WorkerRunner(at.Call(f, (x,)), {"target_s": 0.01}, trial_timeout=120) as runner:
            device = runner.device_info()
            m = runner.measure({"l": {"repr": "for"}})
            pid = runner.pid
        print(json.dumps({"device": device, "learned": _host.learned(), "run_s": m.run_s, "pid": pid,
                          "parent_platforms": jax.config.jax_platforms, "worker_gets": _host.worker_platforms(),
                          "isolated": runner.isolated}))
        """,
    )
    r = python(prog, env=exclusive_env(tmp_path))
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout.strip().splitlines()[-1])
    assert out["isolated"] and out["pid"] is not None and out["run_s"] > 0
    assert out["device"] == out["learned"] and out["device"]["platform"] == "cpu"
    assert out["parent_platforms"] == "cpu" and out["worker_gets"] == ""  # unset, as the user had it


@pytest.mark.slow  # over 3.4 s: in `make test`, not `make test-fast`
def test_pin_is_refused_once_jax_opened_its_devices_and_is_a_no_op_under_jax_platforms_cpu(tmp_path):
    prog = script(
        tmp_path,
        """
        import jax, jax.numpy as jnp
        from autotune.measuring import _host
        jnp.ones(2).block_until_ready()
        print(_host.pin(), _host.pinned(), _host.holds_devices())
        """,
    )
    r = python(prog, env=exclusive_env(tmp_path))
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == ["False", "False", "True"]
    r = python(prog, env=repo_env())  # JAX_PLATFORMS=cpu: nothing to leave to a worker
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == ["False", "False", "False"]


def test_a_pinned_process_asks_a_probe_for_the_device_before_any_worker(tmp_path):
    prog = script(
        tmp_path,
        """
        import json
        from autotune.measuring import _host
        from autotune.program import _compat
        _host.pin()
        device = _host.target_device()
        print(json.dumps({"device": device, "opened_here": _compat.backends_started()}))
        """,
    )
    r = python(prog, env=exclusive_env(tmp_path))
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout.strip().splitlines()[-1])
    assert out["device"]["platform"] == "cpu" and out["device"]["device_count"] >= 1
    assert not out["opened_here"]


@pytest.mark.slow
def test_autotune_tune_measures_every_trial_in_its_worker_on_an_exclusive_device(tmp_path):
    env = exclusive_env(tmp_path)
    r = python(
        "-m",
        "autotune",
        "tune",
        str(ROOT / "studies" / "demo_unroll.py"),
        "--trials",
        "3",
        "--run-seconds",
        "0.05",
        "--storage",
        str(tmp_path / "studies.db"),
        "--json",
        env=env,
        timeout=600,
    )
    assert r.returncode == 0, r.stderr
    assert "without isolation" not in r.stderr and "Traceback" not in r.stderr
    (result,) = json.loads(r.stdout)
    states = [t["state"] for t in result["trials"]]
    assert states.count("complete") >= 3, states
    assert result["confirmed"], "the contenders were re-timed in the worker"


@pytest.mark.slow  # over 4 s: in `make test`, not `make test-fast`
def test_a_process_that_holds_the_device_measures_in_process_with_one_warning(tmp_path):
    prog = script(
        tmp_path,
        """
        import warnings
        import jax.numpy as jnp
        import autotune as at

        @at.autotuned(expected_calls=1000)
        def f(x):
            return at.loop(lambda c, _: (0.5 * c + 1.0, None), x, length=8, name="l")[0]

        x = jnp.zeros(16)
        f(x).block_until_ready()  # a notebook that already ran its program holds the device
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            result = f.tune(x, n_trials=2, progress=False, timing={"target_s": 0.01})
        ours = [str(w.message) for w in caught if "autotune" in str(w.message)]
        print(len(ours))
        print(ours[0] if ours else "")
        print(result.best_config is not None)
        """,
    )
    r = python(prog, env=exclusive_env(tmp_path))
    assert r.returncode == 0, r.stderr
    assert "Traceback" not in r.stderr
    count, message, done = r.stdout.strip().splitlines()[-3:]
    assert count == "1" and done == "True"
    assert "holds the accelerator" in message
    assert "AUTOTUNE_RECORD=1" in message and "autotune tune --recorded" in message


def test_in_process_trial_past_its_deadline_is_reported_at_the_deadline(tmp_path):
    prog = script(
        tmp_path,
        """
        import time
        import jax.numpy as jnp
        from autotune.measuring._runner import InProcessRunner, TrialFailed
        from autotune.program._call import Call

        traced = []

        def slow(x):
            time.sleep(30)  # a trace (or compile) that outlives the deadline by far
            traced.append(True)
            return x + 1

        runner = InProcessRunner(Call(slow, (jnp.ones(2),)), {"target_s": 0.01}, trial_timeout=1.0)
        try:
            runner.measure(None)
        except TrialFailed as exc:
            print(exc.state, traced == [], runner.abandoned)  # reported while the trace still ran
        """,
    )
    r = python(prog, env=repo_env())
    assert r.returncode == 0, r.stderr
    assert r.stdout.split()[-3:] == ["timeout", "True", "1"]
