"""autotune/report/_html.py and _write.py: one self-contained page that names the chosen
config, the range, and every trial's reason."""

from __future__ import annotations

import base64
import json
from html.parser import HTMLParser
from pathlib import Path

import pytest
from _report_study import PNG, check_png, forged_study, tiny_study

import autotune as at
from autotune.report import FIGURES, report


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
def study(tmp_path_factory):
    return tiny_study(tmp_path_factory)


@pytest.fixture(scope="module")
def written(study):
    out = study["root"] / "out"
    return out, report(str(out), study_names=[study["result"].study_name], storage=study["storage"])


@pytest.mark.slow  # over 3.4 s: in `make test`, not `make test-fast`
def test_report_files_are_valid_and_self_contained(written):
    out, files = written
    assert Path(files.html) == out / "report.html" and len(files.figures) == len(FIGURES) == 5
    for fig in files.figures:
        check_png(Path(fig))
    page = parse(out / "report.html")
    assert page.external == [] and "script" not in page.tags and "link" not in page.tags
    assert len(page.images) == 5
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


def test_the_page_and_the_json_name_the_tuned_winner_and_the_range(study, written):
    out, files = written
    result = study["result"]
    (rep,) = files.reports
    text = " ".join(parse(out / "report.html").text)
    assert f"{rep.label(result.best_config.to_dict())}" in text and "★ chosen" in text
    assert "measurements complete for" in text and at._display.range_text(result.complete_range) in text
    (data,) = json.loads(Path(files.data).read_text())
    assert at.Config.from_dict(data["chosen"]["config"]) == result.best_config
    assert data["in_range"] is True and data["crossovers"][-1]["to_calls"] is None
    assert data["storage"] == f"sqlite:///{study['storage']}"
    json.loads(Path(files.data).read_text(), parse_constant=lambda c: pytest.fail(f"{c} in strict JSON"))


@pytest.mark.slow  # over 3.4 s: in `make test`, not `make test-fast`
def test_out_of_range_the_page_gives_the_retune_command(tmp_path_factory, tmp_path):
    forged = forged_study(tmp_path_factory)
    files = report(str(tmp_path / "out"), study_names=[forged["name"]], storage=forged["storage"], expected_calls=5000)
    text = " ".join(parse(Path(files.html)).text)
    assert "were not measured for 5,000 calls" in text and "[0, 2,000]" in text
    assert "autotune tune /studies/forged.py --expected-calls 5000" in text
    assert "(off the Pareto front)" in text  # the default wins calls though FORI dominates its medians


def test_the_sites_table_names_each_site_as_every_command_does(tmp_path_factory):
    """A site with no at.loop name shows the short name of tables' rule (s1...) beside its id."""
    from _report_study import CONFIRMED, SITE, forge_study

    from autotune import _display
    from autotune.report import load_study_report, render_html

    sid = "scan@forged.py:12"
    site = dict(SITE, id=sid, kind="scan", name=None, form="scan")

    def rekey(config):
        (choice,) = config.values()
        return {sid: choice}

    root = tmp_path_factory.mktemp("sitenames")
    storage = str(root / "studies.db")
    default = rekey({"l": {"repr": "scan", "unroll": 1}})
    forge_study(storage, "forged:scan", site, default, [dict(c, config=rekey(c["config"])) for c in CONFIRMED])
    rep = load_study_report("forged:scan@f00d/cpu", storage)
    short = _display.site_names(rep.sites)[sid]
    assert short != sid
    page = render_html([rep], {}, "sites")
    row = page[page.index("<h3>Loop sites</h3>") :]
    row = row[: row.index("</table>")]
    assert f"<td><b>{short}</b></td><td><code>{sid}</code></td>" in row
