"""The gate's files: a Markdown summary for a pull request and a JUnit report.

Links point at the dashboard's pages under ``EVALSITE_BASE_URL`` when it is
set; without it they are the pages' paths, which a reader completes with the
site's address.
"""

from __future__ import annotations

import itertools
import xml.etree.ElementTree as ET
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from django.conf import settings
from django.urls import reverse
from django.utils.http import urlencode

from runs.analysis.compare import ScorerComparison, comparison_item_rows
from runs.management.gate import (
    Gate,
    calibration_note,
    delta_text,
    figure,
    p_text,
    row_line,
    verdict_text,
)

REGRESSIONS_SHOWN = 5
# The worst regressions are chosen among the first items in dataset order:
# reading every regression's outputs of a large run would be slow.
REGRESSIONS_READ = 200
CELL_CHARS = 80


@dataclass(frozen=True, slots=True)
class Regression:
    label: str  # the item's external id, else its index
    link: str
    expected: str
    baseline_output: str
    candidate_output: str


def site_url(path: str) -> str:
    return settings.EVALSITE_BASE_URL + path


def comparison_link(gate: Gate, row: ScorerComparison) -> str:
    query = urlencode(
        {
            "baseline": str(gate.baseline.pk),
            "candidates": str(gate.candidate.pk),
            "scorer": row.scorer,
            "change": "regressions",
        }
    )
    return site_url(f"{reverse('runs:compare')}?{query}")


def worst_regressions(gate: Gate, row: ScorerComparison) -> list[Regression]:
    """A few items that passed in the baseline and fail in the candidate, the
    largest falls first."""
    if not row.regressions:
        return []
    rows = itertools.islice(
        comparison_item_rows(
            baseline=gate.baseline,
            candidate=gate.candidate,
            scorer=row.scorer,
            change="regressions",
        ),
        REGRESSIONS_READ,
    )
    worst = sorted(
        rows,
        key=lambda item: (
            item["candidate_pass_rate"] - item["baseline_pass_rate"],
            item["candidate_score"] - item["baseline_score"],
            item["index"],
        ),
    )[:REGRESSIONS_SHOWN]
    return [
        Regression(
            label=str(item["external_id"] or f"#{item['index']}"),
            link=site_url(
                reverse(
                    "runs:result_detail",
                    kwargs={
                        "run_id": gate.candidate.pk,
                        "result_id": item["candidate_result"],
                    },
                )
            ),
            expected=cell(item["expected"]),
            baseline_output=cell(item["baseline_output"]),
            candidate_output=cell(item["candidate_output"]),
        )
        for item in worst
    ]


def cell(value: Any) -> str:
    """A value on one line of a Markdown table, cut short."""
    text = "" if value is None else str(value)
    text = " ".join(text.split())
    if len(text) > CELL_CHARS:
        text = text[: CELL_CHARS - 1] + "…"
    return text.replace("\\", "\\\\").replace("|", "\\|").replace("`", "'")


def outcome(gate: Gate) -> str:
    failing = [row.scorer for row in gate.rows if gate.fails(row)]
    if failing:
        return f"failed ({', '.join(failing)})"
    return "passed"


# -- Markdown ---------------------------------------------------------------------


def gate_markdown(gate: Gate) -> str:
    """A pull-request comment: the verdicts, then the worst regressions."""
    run, base = gate.candidate, gate.baseline
    lines = [
        f"### evalsite gate: {outcome(gate)}",
        "",
        f"Run [{run.pk}]({site_url(reverse('runs:run_detail', args=[run.pk]))}) "
        f"against baseline run "
        f"[{base.pk}]({site_url(reverse('runs:run_detail', args=[base.pk]))}) "
        f"over dataset `{cell(run.dataset.name)}`; fails on: `{gate.fail_on}`. "
        "Deltas are the candidate minus the baseline, with 95% intervals; "
        "p-values are Holm-adjusted across the scorers.",
        "",
        "| Scorer | Baseline | Candidate | Delta [95% interval] | p-value | Verdict |",
        "|---|---|---|---|---|---|",
    ]
    for row in gate.rows:
        verdict = verdict_text(row.verdict)
        if gate.fails(row):
            verdict = f"**{verdict}**"
        lines.append(
            f"| {cell(row.scorer)} | {figure(row, 'baseline')} | "
            f"{figure(row, 'candidate')} | {delta_text(row)} | {p_text(row)} | "
            f"{verdict} |"
        )
    uncalibrated = gate.uncalibrated
    if uncalibrated:
        lines.append("")
        lines += [
            f"- ⚠ {cell(calibration_note(name, uncalibrated))}"
            + (
                " (fails the gate: --require-calibrated)"
                if gate.require_calibrated
                else ""
            )
            for name in uncalibrated
        ]
    regressed = [row for row in gate.rows if row.regressions]
    if regressed:
        lines += ["", "#### Worst regressions (passed in the baseline, fail now)"]
    for row in regressed:
        lines += regressions_markdown(gate, row)
    return "\n".join(lines) + "\n"


def regressions_markdown(gate: Gate, row: ScorerComparison) -> list[str]:
    shown = worst_regressions(gate, row)
    lines = [
        "",
        f"**{cell(row.scorer)}**: {row.regressions} regressions, "
        f"{row.improvements} improvements "
        f"([all regressions]({comparison_link(gate, row)}))",
        "",
        "| Item | Expected | Baseline output | Output now |",
        "|---|---|---|---|",
    ]
    lines += [
        f"| [{cell(item.label)}]({item.link}) | {item.expected} | "
        f"{item.baseline_output} | {item.candidate_output} |"
        for item in shown
    ]
    return lines


# -- JUnit ------------------------------------------------------------------------


def gate_junit(gate: Gate) -> ET.ElementTree[ET.Element]:
    """One test suite, one test case per scorer, a failure where the gate fails."""
    failures = sum(gate.fails(row) for row in gate.rows)
    counts = {
        "tests": str(len(gate.rows)),
        "failures": str(failures),
        "errors": "0",
        "skipped": "0",
        "time": "0",
    }
    root = ET.Element("testsuites", {"name": "evalsite gate", **counts})
    name = f"run {gate.candidate.pk} against baseline run {gate.baseline.pk}"
    suite = ET.SubElement(root, "testsuite", {"name": name, **counts})
    properties = ET.SubElement(suite, "properties")
    for name, value in (
        ("baseline", gate.baseline.pk),
        ("candidate", gate.candidate.pk),
        ("fail_on", gate.fail_on),
    ):
        ET.SubElement(properties, "property", name=name, value=str(value))
    for row in gate.rows:
        case = ET.SubElement(
            suite,
            "testcase",
            name=row.scorer,
            classname=f"evalsite.run{gate.candidate.pk}",
            time="0",
        )
        note = (
            [calibration_note(row.scorer, gate.uncalibrated)]
            if row.scorer in gate.uncalibrated
            else []
        )
        if gate.fails(row):
            kind = "uncalibrated_judge" if gate.fails_calibration(row) else ""
            failure = ET.SubElement(
                case,
                "failure",
                message="; ".join([row_line(row), *note]),
                type=kind or row.verdict,
            )
            failure.text = "\n".join(
                [row_line(row), *note, f"comparison: {comparison_link(gate, row)}"]
                + [
                    f"{item.label}: {item.link}"
                    for item in worst_regressions(gate, row)
                ]
            )
        ET.SubElement(case, "system-out").text = "\n".join([row_line(row), *note])
    ET.indent(root)
    return ET.ElementTree(root)


def gate_files_write(gate: Gate, *, report: Path | None, junit: Path | None) -> None:
    if report is not None:
        report.write_text(gate_markdown(gate), encoding="utf-8")
    if junit is not None:
        gate_junit(gate).write(junit, encoding="utf-8", xml_declaration=True)
