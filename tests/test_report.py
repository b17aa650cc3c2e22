"""`autotune report`: a real (tiny) study in, an offline HTML page and valid PNG figures out."""

from __future__ import annotations

import base64
import dataclasses
import json
from html.parser import HTMLParser
from pathlib import Path

import jax.numpy as jnp
import optuna
import pytest

import autotune as at
from autotune import cli
from autotune._select import crossover_intervals
from autotune._report import FIGURES, load_study_report, report, studies_for_file
from autotune._runner import InProcessRunner
from autotune._studyfile import load_examples

FAST = {"target_s": 0.01, "min_reps": 3, "warmup": 1}
PNG = b"\x89PNG\r\n\x1a\n"
STUDY_FILE = '''
import jax.numpy as jnp
import autotune as at

@at.autotuned(expected_calls=1000)
def smooth(x):
    return at.loop(lambda c, _: (jnp.sin(0.5 * c) + 1.0, None), x, length=8, name="smooth")[0]

def examples():
    return [(smooth, (jnp.zeros(16),))]
'''


class Troubled(InProcessRunner):
    """A real runner that fails the fully unrolled config and corrupts fori x4's outputs."""

    def measure(self, config, **options):
        if any(c.repr == "for" for c in config.values()):
            raise RuntimeError("simulated XLA failure: out of memory while compiling the unrolled loop")
        m = super().measure(config, **options)
        if any(c.repr == "fori" and c.unroll == 4 for c in config.values()):
            m = dataclasses.replace(m, outputs=m.outputs + 1.0)
        return m


@pytest.fixture(scope="module")
def study(tmp_path_factory):
    """A tiny real study: every config of one 8-step loop, with a failed, a rejected and a timed-out trial."""
    root = tmp_path_factory.mktemp("report")
    path = root / "at_report_tiny_study.py"
    path.write_text(STUDY_FILE)
    (ex,) = load_examples(str(path))
    storage = str(root / "studies.db")
    runner = Troubled(ex.fn.fun, ex.args, {}, {}, FAST)
    result = at.tune(ex.fn.fun, *ex.args, function_key=ex.fn.key, expected_calls=1000, storage=storage,
                     sampler="grid", timing=FAST, runner=runner, confirm_rounds=1)
    # A trial that some other worker timed out (as a worker process records it).
    s = optuna.load_study(study_name=result.study_name, storage="sqlite:///" + storage)
    s.add_trial(optuna.trial.create_trial(state=optuna.trial.TrialState.FAIL, user_attrs={
        "config": json.dumps({"smooth": {"repr": "scan", "unroll": 2}}), "outcome": "timeout",
        "reason": "trial timeout: compile + run took longer than 30 s"}))
    return {"root": root, "file": str(path), "storage": storage, "result": result, "key": ex.fn.key}


def check_png(path: Path) -> tuple[int, int]:
    data = path.read_bytes()
    assert data[:8] == PNG, path
    import matplotlib.image

    img = matplotlib.image.imread(str(path))
    assert img.ndim == 3 and img.shape[0] > 300 and img.shape[1] > 500
    assert img[..., :3].std() > 0.05  # not a blank canvas
    try:
        from PIL import Image
    except ImportError:
        return img.shape[1], img.shape[0]
    with Image.open(path) as im:
        im.verify()
    return img.shape[1], img.shape[0]


class Page(HTMLParser):
    def __init__(self):
        super().__init__()
        self.tags, self.images, self.external, self.text = [], [], [], []

    def handle_starttag(self, tag, attrs):
        self.tags.append(tag)
        attrs = dict(attrs)
        if tag == "img":
            self.images.append(attrs.get("src", ""))
        for name in ("src", "href"):
            value = attrs.get(name) or ""
            if value and not value.startswith(("data:", "#")):
                self.external.append((tag, value))

    def handle_data(self, data):
        self.text.append(data)


def parse(path: Path) -> Page:
    page = Page()
    page.feed(path.read_text(encoding="utf-8"))
    page.close()
    return page


@pytest.fixture(scope="module")
def written(study):
    """The report of the tiny study, by study name."""
    out = study["root"] / "out"
    return out, report(str(out), study_names=[study["result"].study_name], storage=study["storage"])


def test_report_files_are_valid_and_self_contained(written):
    out, files = written
    assert Path(files.html) == out / "report.html" and len(files.figures) == len(FIGURES) == 4
    for fig in files.figures:
        check_png(Path(fig))
    page = parse(out / "report.html")
    assert page.external == [] and "script" not in page.tags and "link" not in page.tags
    assert len(page.images) == 4
    on_disk = {Path(f).read_bytes() for f in files.figures}
    for src in page.images:
        assert src.startswith("data:image/png;base64,")
        data = base64.b64decode(src.split(",", 1)[1], validate=True)
        assert data[:8] == PNG and data in on_disk
    text = " ".join(page.text)
    # Failed, rejected and timed-out trials are visible with their reasons.
    for needle in ("simulated XLA failure", "correctness guard", "trial timeout", "rejected", "error", "timeout"):
        assert needle in text
    assert "cheapest for calls in" in text and files.reports[0].study_name in text


def test_report_data_matches_the_study(study, written):
    result = study["result"]
    rep = load_study_report(result.study_name, study["storage"])
    counts = rep.outcome_counts()
    assert counts["error"] == 1 and counts["rejected"] == 1 and counts["timeout"] == 1
    assert counts.get("complete", 0) + counts.get("shared", 0) == 5  # shared: lowered to an earlier program
    # Same Pareto set and winner as tune() computed and stored.
    key = lambda p: (json.dumps(p["config"], sort_keys=True), p["compile_s"], p["run_s"])  # noqa: E731
    assert sorted(map(key, rep.pareto)) == sorted(map(key, result.pareto))
    assert at.Config.from_dict(rep.chosen["config"]) == result.best_config
    assert rep.chosen["cost"] == pytest.approx(result.best_cost)
    assert rep.intervals == crossover_intervals(result.confirmed, default=result.default_config.to_dict())
    assert rep.default["config"] == result.default.config.to_dict() == {"smooth": {"repr": "scan", "unroll": 1}}
    (data,) = json.loads(Path(written[1].data).read_text())
    assert data["crossovers"][-1]["to_calls"] is None
    assert [c["from_calls"] for c in data["crossovers"]] == [i["from_calls"] for i in rep.intervals]
    # Re-scored for another call count: the pick comes from the Pareto set, as the decorator does.
    rep1 = load_study_report(result.study_name, study["storage"], expected_calls=1)
    cheapest = min(rep.pareto, key=lambda p: p["compile_s"] + p["run_s"])
    assert rep1.chosen["config"] == cheapest["config"] and rep1.objective.expected_calls == 1


def test_cli_report_on_a_study_file_and_by_name(study, tmp_path, capsys):
    assert studies_for_file(study["file"], study["storage"]) == [study["result"].study_name]
    out = tmp_path / "by_file"
    assert cli.main(["report", study["file"], "--storage", study["storage"], "--out", str(out)]) == 0
    text = capsys.readouterr().out
    assert "cheapest for calls" in text and "wrote" in text and (out / "report.html").is_file()
    assert sorted(p.name.split("_", 1)[1] for p in out.glob("*.png")) == sorted(f"{f}.png" for f in FIGURES)

    out2 = tmp_path / "by_name"
    argv = ["report", "--study", study["result"].study_name, "--storage", study["storage"], "--out", str(out2), "--json"]
    assert cli.main(argv) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["html"] == str(out2 / "report.html") and len(data["figures"]) == 4
    assert data["studies"][0]["function_key"] == study["key"]


def test_cli_report_errors_say_what_to_do(study, tmp_path, capsys):
    assert cli.main(["report", "--out", str(tmp_path / "x")]) == 2
    assert "--study" in capsys.readouterr().err
    assert cli.main(["report", "--study", "nope", "--storage", study["storage"], "--out", str(tmp_path / "x")]) == 2
    assert "No study 'nope'" in capsys.readouterr().err
    missing = tmp_path / "missing.db"
    assert cli.main(["report", "--study", "s", "--storage", str(missing), "--out", str(tmp_path / "x")]) == 2
    assert "autotune tune" in capsys.readouterr().err and not missing.exists()


def test_a_study_where_nothing_ran_still_reports(tmp_path):
    class Broken(InProcessRunner):
        def measure(self, config):
            raise RuntimeError("no backend")

    fn = lambda x: at.loop(lambda c, _: (c + 1.0, None), x, length=4, name="l")[0]  # noqa: E731
    storage = str(tmp_path / "s.db")
    with pytest.raises(at.StudyError):
        at.tune(fn, jnp.zeros(2), function_key="m:broken", storage=storage, sampler="grid",
                runner=Broken(fn, (jnp.zeros(2),), {}, {}, FAST))
    (name,) = optuna.study.get_all_study_names(storage="sqlite:///" + storage)
    files = report(str(tmp_path / "out"), study_names=[name], storage=storage)
    for fig in files.figures:
        check_png(Path(fig))
    assert files.reports[0].pareto == [] and files.reports[0].chosen is None
    json.loads(Path(files.data).read_text(), parse_constant=lambda c: pytest.fail(f"{c} in strict JSON"))
