"""Each run's per-item scores, and the (items x runs) matrix of one scorer.

The figures follow the comparison's definitions: a result whose call failed,
or whose score errored, counts as not passed with value 0; a score skipped by
its condition leaves the item's epochs for that scorer, as does a result
stopped in flight (a call cut short by its run's stop: no sample), and an
item left out in every epoch of a run has no score of that scorer there.
With several epochs an item's figure is its mean over epochs (its pass
fraction, its mean value). Runs pair by item when they share one dataset
version, by external id across versions of one dataset (same project, same
name). Finished single-epoch runs are read from their stored verdicts
(``analysis/verdicts.py``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from functools import reduce

import numpy as np

from runs.analysis import compare, verdicts
from runs.errors import InvalidInput
from runs.models import Item, Run

STOPPED, SKIPPED, PASSED = verdicts.STOPPED, verdicts.SKIPPED, verdicts.PASSED


def leaderboard_pairing(runs: Sequence[Run]) -> str:
    """How the runs' items pair (``item`` or ``external_id``); else InvalidInput."""
    ids = [run.pk for run in runs]
    if len(set(ids)) != len(ids):
        raise InvalidInput("each run may appear only once", field="runs")
    if len({run.dataset_id for run in runs}) == 1:
        return compare.PAIRED_BY_ITEM
    first = runs[0]
    for run in runs[1:]:
        if (run.project_id, run.dataset.name) != (first.project_id, first.dataset.name):
            raise InvalidInput(
                f"run {run.pk} is over dataset {run.dataset.name!r}, run "
                f"{first.pk} over {first.dataset.name!r}: only runs over one "
                "dataset (any of its versions, in one project) can be ranked",
                field="runs",
            )
    return compare.PAIRED_BY_EXTERNAL_ID


@dataclass(frozen=True, slots=True)
class RunItems:
    """One run's items (sorted keys) and, per scorer, each item's figures."""

    keys: np.ndarray
    scorers: tuple[str, ...]
    kept: np.ndarray  # (items, scorers) bool: some epoch not skipped
    passes: np.ndarray  # (items, scorers) pass fraction over kept epochs
    values: np.ndarray  # (items, scorers) mean value over kept epochs
    graded: np.ndarray  # (scorers,) bool: a kept value other than 0 and 1


def run_items(run: Run, paired_by: str) -> RunItems:
    """The run's per-item figures of every scorer, keyed for the pairing."""
    found = verdicts.run_verdicts(run=run) or verdicts.compute(run)
    keys: np.ndarray = found.items
    if paired_by == compare.PAIRED_BY_EXTERNAL_ID:
        external = dict(
            Item.objects.filter(dataset_id=run.dataset_id).values_list(
                "pk", "external_id"
            )
        )
        keys = np.array([external[int(pk)] for pk in found.items], dtype=str)
    unique, where = np.unique(keys, return_inverse=True)
    # Stopped in flight is no sample: left out as a skipped score is.
    kept_epochs = (found.states & (SKIPPED | STOPPED)) == 0
    passed = ((found.states & PASSED) > 0) & kept_epochs
    values = np.where(kept_epochs, found.values, 0.0)
    one_each = len(unique) == len(keys)
    if one_each:  # one result per item: nothing to group
        order = np.argsort(where)
        epochs, passes, totals = (
            kept_epochs[order].astype(float),
            passed[order].astype(float),
            values[order],
        )
    else:
        epochs = _sums(where, kept_epochs.astype(float), len(unique))
        passes = _sums(where, passed.astype(float), len(unique))
        totals = _sums(where, values, len(unique))
    kept = epochs > 0
    with np.errstate(invalid="ignore", divide="ignore"):
        fractions = np.where(kept, passes / np.maximum(epochs, 1), 0.0)
        means = np.where(kept, totals / np.maximum(epochs, 1), 0.0)
    graded = ((found.values != 0) & (found.values != 1) & kept_epochs).any(axis=0)
    return RunItems(unique, found.scorers, kept, fractions, means, graded)


def _sums(where: np.ndarray, columns: np.ndarray, count: int) -> np.ndarray:
    """Per-item sums of each column of the results' ``columns``."""
    out = np.zeros((count, columns.shape[1]))
    np.add.at(out, where, columns)
    return out


def _shared(first: np.ndarray, second: np.ndarray) -> np.ndarray:
    return np.intersect1d(first, second, assume_unique=True)


def shared_scorers(runs: Sequence[Run]) -> list[str]:
    """The scorers of every run, in the first run's order."""
    others = [set(run.scorer_names) for run in runs[1:]]
    return [name for name in runs[0].scorer_names if all(name in s for s in others)]


def scorer_matrix(items: Sequence[RunItems], scorer: str) -> tuple[np.ndarray, bool]:
    """The (shared items x runs) matrix of the scorer, and whether it is numeric
    (its mean values; else its pass fractions)."""
    columns = [one.scorers.index(scorer) for one in items]
    kept_keys = [
        one.keys[one.kept[:, j]] for one, j in zip(items, columns, strict=True)
    ]
    # Each run's keys are sorted and distinct (np.unique): merged, not hashed.
    shared = reduce(_shared, kept_keys) if kept_keys else np.array([])
    numeric = any(bool(one.graded[j]) for one, j in zip(items, columns, strict=True))
    matrix = np.empty((len(shared), len(items)))
    for i, (one, j) in enumerate(zip(items, columns, strict=True)):
        rows = np.searchsorted(one.keys, shared)
        matrix[:, i] = (one.values if numeric else one.passes)[rows, j]
    return matrix, numeric
