"""The report's one self-contained HTML page: inline CSS, figures as base64 PNG, no script,
no external resource. What it names "chosen", every cost and interval, and the range come
from the :class:`~autotune.report._data.StudyReport` (that is, from ``autotune.select``)."""

from __future__ import annotations

import html
from collections.abc import Sequence
from typing import Any

from autotune import _display
from autotune import select as _select
from autotune.program._config import Config, choice_label
from autotune.report._data import StudyReport
from autotune.report._figures import CAPTIONS, FIGURES

_CSS = """
body{font-family:system-ui,-apple-system,Segoe UI,Roboto,sans-serif;margin:24px auto;max-width:1100px;color:#222;
padding:0 16px} h1{font-size:1.5em} h2{font-size:1.25em;border-bottom:2px solid #ddd;padding-bottom:4px;margin-top:2em}
h3{font-size:1.05em;margin-top:1.4em} table{border-collapse:collapse;margin:8px 0;font-size:0.88em}
th,td{border:1px solid #ddd;padding:3px 8px;text-align:left;vertical-align:top} th{background:#f4f4f4}
td.num{text-align:right;font-variant-numeric:tabular-nums} .swatch{display:inline-block;width:11px;height:11px;
border-radius:2px;margin-right:4px;vertical-align:middle} figure{margin:12px 0} figure img{max-width:100%;
border:1px solid #eee} figcaption{font-size:0.85em;color:#555;max-width:900px} code{font-size:0.9em}
.muted{color:#777} .bad{color:#b71c1c} tr.chosen td{background:#fff8e1} .reason{max-width:520px;white-space:pre-wrap;
font-family:ui-monospace,monospace;font-size:0.85em} .warn{background:#fff3e0;border-left:4px solid #ef6c00;
padding:6px 10px}
"""


def _e(x: Any) -> str:
    return html.escape(str(x), quote=True)


def _interval_text(p: dict[str, Any]) -> str:
    if not p.get("optimal"):
        return "never cheapest"
    return "; ".join(f"[{_select.format_calls(a)}, {_select.format_calls(b)})" for a, b in p["optimal"])


def _summary(rep: StudyReport) -> list[str]:
    obj = rep.objective
    counts = rep.outcome_counts()
    rescored = rep.study_objective.get("expected_calls") not in (None, obj.expected_calls)
    rows = [
        f"<tr><th>study</th><td><code>{_e(rep.study_name)}</code></td></tr>",
        f"<tr><th>storage</th><td><code>{_e(rep.storage)}</code></td></tr>",
        f"<tr><th>device</th><td>{_e(rep.device.get('platform', '?'))} / {_e(rep.device.get('device_kind', '?'))}"
        f" ×{_e(rep.device.get('device_count', '?'))}, jax {_e(rep.device.get('jax', '?'))}</td></tr>",
        f"<tr><th>search</th><td>{_e(rep.search)}"
        f"{' (NSGA-II on compile and run seconds)' if rep.search == 'pareto' else ' (weighted cost)'}</td></tr>",
        f"<tr><th>objective</th><td>cost = {obj.compile_weight:g}·compile + {obj.runtime_weight:g}·"
        f"{_e(_select.format_calls(obj.expected_calls))}·run{_e(obj.describe())}"
        + (
            f" <span class='muted'>(re-scored; the study was tuned for "
            f"{_e(_select.format_calls(float(rep.study_objective['expected_calls'])))} calls)</span>"
            if rescored
            else ""
        )
        + "</td></tr>",
        "<tr><th>trials</th><td>"
        + ", ".join(f"{n} {_e(o)}" for o, n in sorted(counts.items(), key=lambda kv: -kv[1]))
        + "</td></tr>",
        f"<tr><th>measurements complete for</th><td>{_e(_display.range_text(rep.complete_range))} calls"
        + (
            f" <span class='muted'>({_e(rep.complete_range.get('why'))})</span>"
            if rep.complete_range and rep.complete_range.get("why")
            else ""
        )
        + "</td></tr>",
    ]
    if rep.chosen:
        speed = ""
        if rep.default and rep.chosen["cost"] > 0:
            speed = (
                f" — {_display.ratio(rep.default['cost'] / rep.chosen['cost'])} cheaper than the default "
                f"({_display.cost(rep.default['cost'])})"
            )
        rows.append(
            f"<tr><th>chosen</th><td><b>{_e(rep.label(rep.chosen['config']))}</b>, cost "
            f"{_e(_display.cost(rep.chosen['cost']))}{_e(speed)}</td></tr>"
        )
    parts = ["<table>", *rows, "</table>"]
    if not rep.in_range:
        command = rep.retune_command()
        parts.append(
            f"<p class='warn'>The configs were not measured for {_e(_select.format_calls(obj.expected_calls))}"
            f" calls: the measurements are complete for {_e(_display.range_text(rep.complete_range))} calls, "
            "so a config the study stopped or never measured could be cheaper; the chosen one is the best "
            "measured one. "
            + (f"Re-tune for it: <code>{_e(command)}</code>" if command else "Re-tune it for that call count.")
            + "</p>"
        )
    return parts


def _shown_table(rep: StudyReport) -> list[str]:
    if not rep.shown:
        return ["<p class='bad'>No complete trial: no configs to compare.</p>"]
    obj = rep.objective
    chosen_key = Config.from_dict(rep.chosen["config"]) if rep.chosen else None
    default_key = Config.from_dict(rep.default_config)
    parts = [
        "<table><tr><th></th><th>config</th><th>compile</th><th>run</th>"
        f"<th>cost at {_e(_select.format_calls(obj.expected_calls))} calls</th><th>cheapest for calls in</th></tr>"
    ]
    for p in rep.shown:
        key = Config.from_dict(p["config"])
        tags = (
            (" ★ chosen" if key == chosen_key else "")
            + (" (default)" if key == default_key else "")
            + ("" if p.get("on_front", True) else " <span class='muted'>(off the Pareto front)</span>")
            + ("" if p.get("confirmed") or p.get("rounds") else " <span class='muted'>(single trial)</span>")
        )
        parts.append(
            f"<tr{' class=chosen' if key == chosen_key else ''}><td><span class='swatch' style='background:"
            f"{_e(p['color'])}'></span><b>{_e(p['label'])}</b></td><td>{_e(rep.label(p['config']))}{tags}</td>"
            f"<td class='num'>{_e(_display.seconds(p['compile_cost_s']))}</td>"
            f"<td class='num'>{_e(_display.seconds(p['run_cost_s']))}</td>"
            f"<td class='num'>{_e(_display.cost(rep.cost_of(p)))}</td><td>{_e(_interval_text(p))}</td></tr>"
        )
    parts.append("</table>")
    return parts


def _sites_table(rep: StudyReport) -> list[str]:
    parts = [
        "<h3>Loop sites</h3><table><tr><th>name</th><th>site id</th><th>kind</th><th>form</th><th>length</th>"
        "<th>depth</th><th>source</th><th>default</th><th>chosen</th></tr>"
    ]
    names = _display.site_names(rep.sites)  # the short names every command uses for this function
    for s in rep.tunable_sites:
        pick = (rep.chosen or {}).get("config", {}).get(s["id"])
        form = str(s.get("form") or s.get("kind")) + (", derived" if s.get("derived") else "")
        parts.append(
            f"<tr><td><b>{_e(names.get(s['id'], s['id']))}</b></td><td><code>{_e(s['id'])}</code></td>"
            f"<td>{_e(s.get('kind'))}</td><td>{_e(form)}</td>"
            f"<td class='num'>{_e('dynamic' if s.get('length') is None else s['length'])}</td>"
            f"<td class='num'>{_e(s.get('depth', 0))}</td><td>{_e(s.get('source') or '-')}</td>"
            f"<td>{_e(choice_label(s.get('default') or {}))}</td>"
            f"<td>{_e(choice_label(pick) if pick else '-')}</td></tr>"
        )
    parts.append("</table>")
    return parts


def _study_html(rep: StudyReport, images: dict[str, str]) -> str:
    parts = [
        f'<h2 id="{_e(rep.slug)}">{_e(rep.function_key)}</h2>',
        *_summary(rep),
        "<h3>Which config for how many calls</h3>",
        *_shown_table(rep),
    ]
    for name in FIGURES:
        if name in images:
            parts.append(
                f"<figure><img alt='{_e(name)} figure' src='data:image/png;base64,{images[name]}'>"
                f"<figcaption>{_e(CAPTIONS[name])}</figcaption></figure>"
            )
    if rep.confirmed:
        parts.append(
            "<h3>Confirmation (interleaved re-measurement; medians)</h3><table><tr><th>config</th>"
            "<th>rounds</th><th>compile</th><th>run</th><th>cost</th></tr>"
        )
        for c in rep.confirmed:  # ranked by _select.ranked
            rounds = len(c["rounds"]) if isinstance(c.get("rounds"), list) else c.get("rounds", "-")
            parts.append(
                f"<tr><td>{_e(rep.label(c['config']))}</td><td class='num'>{_e(rounds)}</td>"
                f"<td class='num'>{_e(_display.seconds(c['compile_cost_s']))}</td>"
                f"<td class='num'>{_e(_display.seconds(c['run_cost_s']))}</td>"
                f"<td class='num'>{_e(_display.cost(c['cost']))}</td></tr>"
            )
        parts.append("</table>")
    if rep.tunable_sites:
        parts += _sites_table(rep)
    parts.append(
        "<h3>Trials</h3><table><tr><th>#</th><th>outcome</th><th>config</th><th>compile</th>"
        "<th>run</th><th>cost</th><th>reason</th></tr>"
    )
    for t in sorted(rep.trials, key=lambda t: t.number):
        cls = " class='bad'" if t.failed else ""
        parts.append(
            f"<tr><td class='num'>{t.number}</td><td{cls}>{_e(t.outcome)}</td><td>{_e(rep.label(t.config))}"
            f"</td><td class='num'>{_e(_display.seconds(t.compile_total_s))}</td>"
            f"<td class='num'>{_e(_display.seconds(t.run_s))}</td><td class='num'>{_e(_display.cost(t.cost))}"
            f"</td><td class='reason'>{_e(t.reason or '')}</td></tr>"
        )
    parts.append("</table>")
    return "\n".join(parts)


def render_html(reports: Sequence[StudyReport], images: dict[str, dict[str, str]], title: str) -> str:
    """One self-contained page: inline CSS, figures as base64 PNG, no script, no external resource."""
    toc = ""
    if len(reports) > 1:
        toc = (
            "<ul>"
            + "".join(
                f"<li><a href='#{_e(r.slug)}'>{_e(r.function_key)}</a> "
                f"<span class='muted'>{_e(r.study_name)}</span></li>"
                for r in reports
            )
            + "</ul>"
        )
    body = "\n".join(_study_html(r, images.get(r.slug, {})) for r in reports)
    return (
        f"<!DOCTYPE html>\n<html lang='en'><head><meta charset='utf-8'>"
        f"<meta name='viewport' content='width=device-width, initial-scale=1'><title>{_e(title)}</title>"
        f"<style>{_CSS}</style></head><body><h1>{_e(title)}</h1>"
        "<p class='muted'>cost = compile_weight·(trace + lower + compile) + runtime_weight·expected_calls·run. "
        "Generated by jax-autotune from the study's stored trials; nothing was re-measured.</p>"
        f"{toc}{body}</body></html>\n"
    )
