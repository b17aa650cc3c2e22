"""Write a report: the PNG figures, ``report.html`` and ``report.json``, with the one
progress bar (``study.Progress``) while the figures are drawn."""

from __future__ import annotations

import base64
import json
import os
from collections.abc import Sequence
from dataclasses import dataclass

from autotune._errors import StudyError
from autotune.report._data import StudyReport, load_study_report, no_study_error, studies_for_file
from autotune.report._figures import FIGURE_MAKERS, FIGURES
from autotune.report._html import render_html


@dataclass
class ReportFiles:
    """What :func:`write_report` wrote."""

    html: str
    figures: list[str]
    data: str
    reports: list[StudyReport]


def write_report(
    reports: Sequence[StudyReport], out_dir: str, *, title: str | None = None, progress: bool = False
) -> ReportFiles:
    """Write ``report.html``, ``report.json`` and five PNG figures per study into ``out_dir``.

    Arguments:
        reports: from :func:`load_study_report`.
        out_dir: created if missing; files of the same names are replaced.
        title: the page title (default names the studies' functions).
        progress: show the progress bar on stderr.

    Returns:
        A :class:`ReportFiles` with the paths.
    """
    from autotune.study import Progress

    if not reports:
        raise StudyError("Nothing to report: no study was given.")
    os.makedirs(out_dir, exist_ok=True)
    images: dict[str, dict[str, str]] = {}
    written: list[str] = []
    with Progress(progress, len(reports) * len(FIGURES), "report", transient=True) as bar:
        for rep in reports:
            images[rep.slug] = {}
            for name in FIGURES:
                bar.update(status=f"{rep.function_key}: {name}")
                path = os.path.join(out_dir, f"{rep.slug}_{name}.png")
                FIGURE_MAKERS[name](rep, path)
                with open(path, "rb") as f:
                    images[rep.slug][name] = base64.b64encode(f.read()).decode("ascii")
                rep.figures[name] = os.path.basename(path)
                written.append(path)
                bar.update(advance=1)
    title = title or ("autotune report: " + ", ".join(dict.fromkeys(r.function_key for r in reports)))
    html_path = os.path.join(out_dir, "report.html")
    with open(html_path, "w", encoding="utf-8") as f:
        f.write(render_html(reports, images, title))
    data_path = os.path.join(out_dir, "report.json")
    with open(data_path, "w", encoding="utf-8") as f:
        json.dump([r.to_dict() for r in reports], f, indent=2, allow_nan=False)
    return ReportFiles(html=html_path, figures=written, data=data_path, reports=list(reports))


def report(
    out_dir: str,
    *,
    study_names: Sequence[str] | None = None,
    file: str | None = None,
    storage: str | None = None,
    cache: str | None = None,
    expected_calls: float | None = None,
    all_programs: bool = False,
    progress: bool = False,
) -> ReportFiles:
    """Write a report of some studies: by name, or those of a study file's functions.

    Arguments:
        out_dir: the folder to write ``report.html``, ``report.json`` and the PNGs into.
        study_names: the studies to report on; or
        file: a study file (``studies/*.py``): the studies of its functions (see :func:`studies_for_file`).
        storage: the Optuna storage; default the one ``tune`` uses beside ``cache``.
        cache: the cache location that default is derived from (default ``$AUTOTUNE_CACHE``...).
        expected_calls: re-score for this call count (default: each study's own).
        all_programs: with ``file``, also studies of older versions of its functions.
        progress: show progress on stderr.

    Example::

        files = report("out", file="studies/seed_rollout.py")
        print(files.html, files.reports[0].chosen["config"])
    """
    from autotune._paths import default_storage_url, storage_url

    url = storage_url(storage) if storage else default_storage_url(cache)
    if (study_names is None) == (file is None):
        raise StudyError("Report on either a study file or study names, not both or neither.")
    if file is not None:
        study_names = studies_for_file(file, url, all_programs=all_programs)
        if not study_names:
            raise no_study_error(file, url)
    reports = [load_study_report(name, url, expected_calls=expected_calls) for name in study_names]
    return write_report(reports, out_dir, progress=progress)
