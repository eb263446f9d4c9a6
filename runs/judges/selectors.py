"""Reads of LLM judges measured against people, for the API."""

from __future__ import annotations

from typing import Any

from django.contrib.auth.models import User

from runs.results.selectors import run_get
from runs.review.calibration import Calibration, run_judge_agreement


def calibration_as_dict(calibration: Calibration) -> dict[str, Any]:
    """One judge against one human scorer, as the API answers it."""
    found = calibration.agreement
    out: dict[str, Any] = {
        "judge": calibration.judge,
        "human": calibration.human,
        "calibrated": calibration.calibrated,
        "gap": calibration.gap,
    }
    if found is None:
        empty = ("kappa", "kappa_interval", "agreement", "confusion", "precision")
        rest = ("recall", "judge_fail_rate", "people_fail_rate", "direction")
        return (
            out
            | dict.fromkeys((*empty, *rest, "leaning", "p_value"))
            | {
                "items": 0,
                "kappa_undefined": "",
                "confidence": 0.95,
            }
        )
    interval = found.kappa.interval
    return out | {
        "items": found.items,
        "kappa": found.kappa.value,
        "kappa_undefined": found.kappa.undefined,
        "kappa_interval": list(interval) if interval else None,
        "confidence": found.kappa.confidence,
        "agreement": found.agreement,
        "confusion": {
            "both_fail": found.confusion.both_fail,
            "judge_fails_people_pass": found.confusion.judge_fails_people_pass,
            "judge_passes_people_fail": found.confusion.judge_passes_people_fail,
            "both_pass": found.confusion.both_pass,
        },
        "precision": found.precision,
        "recall": found.recall,
        "judge_fail_rate": found.judge_fail_rate,
        "people_fail_rate": found.people_fail_rate,
        "direction": found.direction,
        "leaning": found.leaning,
        "p_value": found.p_value,
    }


def run_judge_agreement_get(*, user: User, run_id: int) -> dict[str, Any]:
    """Every LLM judge of a run the user may see against every human scorer."""
    run = run_get(user=user, run_id=run_id)
    return {
        "run": run.pk,
        "kappa_threshold": run.project.judge_kappa_threshold,
        "min_items": run.project.judge_min_items,
        "judges": [calibration_as_dict(c) for c in run_judge_agreement(run)],
    }
