"""Reports of tuning studies: tables, PNG figures and one self-contained HTML page.

A report reads an Optuna study written by :func:`autotune.tune` (every trial keeps its
config and its trace/lower/compile/run seconds as user attributes) through the study
adapter, so it can show the trade-off for *any* call count without measuring again.
``_data`` reads and decides nothing itself (``autotune.select`` does), ``_figures`` draws the PNGs
(matplotlib is imported only then), ``_html`` writes the page, ``_write`` puts them on disk.

Example::

    from autotune.report import report
    files = report("out", file="studies/seed_rollout.py")   # out/report.html, report.json, PNGs
"""

from autotune.report._axes import OUTCOME_STYLE as OUTCOME_STYLE
from autotune.report._data import StudyReport as StudyReport
from autotune.report._data import TrialRow as TrialRow
from autotune.report._data import load_study_report as load_study_report
from autotune.report._data import studies_for_file as studies_for_file
from autotune.report._figures import CAPTIONS as CAPTIONS
from autotune.report._figures import FIGURES as FIGURES
from autotune.report._html import render_html as render_html
from autotune.report._write import ReportFiles as ReportFiles
from autotune.report._write import report as report
from autotune.report._write import write_report as write_report
