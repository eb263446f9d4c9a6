"""Ended runs whose results hold every status, error kind, verdict and
cluster, stored as the executor stores them, for the results table's filters
and the failure clusters."""

from __future__ import annotations

from django.utils import timezone

from runs.executor import store
from runs.executor.store import ResultRecord, ScoreRecord
from runs.models import Dataset, ErrorKind, Item, Run
from runs.results.services import run_create

SCORERS = ["exact_match", {"kind": "exact_match", "name": "second"}]
# Item indexes with no result in any epoch (skipped once the run ends), and
# with none in epoch 1 only (of a run of two epochs).
UNSTORED = 12
UNSTORED_SECOND_EPOCH = 11


def stored(index: int, epoch: int) -> bool:
    if index % 13 == UNSTORED:
        return False
    return not (epoch == 1 and index % 13 == UNSTORED_SECOND_EPOCH)


def _error(index: int, epoch: int) -> tuple[str, str, str, str] | None:
    """(status, kind, type, message) of a result whose call failed."""
    if index % 11 == 3:
        return "failed", ErrorKind.TRANSIENT, "HTTP 503", f"reset by peer #{index}"
    if index % 11 == 7:
        return "timed_out", ErrorKind.TIMEOUT, "Timeout", f"read timed out {index}s"
    if (index + epoch) % 17 == 5:
        return "failed", ErrorKind.PERMANENT, "HTTP 400", "bad request"
    return None


def _scores(index: int, epoch: int, flip: bool) -> list[ScoreRecord]:
    draw = (index + epoch + (2 if flip else 0)) % 5
    if draw in (0, 4):
        exact = ScoreRecord("exact_match", 1.0, True)
    elif draw == 1:
        exact = ScoreRecord("exact_match", 0.0, False, reason=f"expected {index}")
    elif draw == 2:
        exact = ScoreRecord("exact_match", None, None, error="ValueError: boom")
    else:
        exact = ScoreRecord("exact_match", 0.0, False, reason="the answer is empty")
    scores = [exact]
    if index % 7 == 6:
        return scores  # no score of the second scorer
    second = (index + epoch) % 3
    if second == 0:
        scores.append(ScoreRecord("second", None, None, reason="skipped", skipped=True))
    else:
        passed = second == 1
        reason = "" if passed else "too long"
        scores.append(ScoreRecord("second", float(passed), passed, reason=reason))
    return scores


def varied_run(dataset: Dataset, *, epochs: int = 1, flip: bool = False) -> Run:
    """An ended (cancelled) run of ``dataset``: results of every status,
    error kind and verdict of two scorers, in clusters of errors and of
    failing scores; some items without a result (skipped). ``flip`` moves
    the verdicts, for a run to compare with another."""
    run = run_create(
        user=None,
        dataset=dataset,
        target_kind="openai_chat",
        target_config={"base_url": "http://127.0.0.1:9/v1", "model": "m"},
        scorers=SCORERS,
        options={"max_attempts": 1, "epochs": epochs},
        launch=False,
    )
    now = timezone.now()
    records = []
    for item in Item.objects.filter(dataset=dataset).order_by("index"):
        for epoch in range(epochs):
            if not stored(item.index, epoch):
                continue
            error = _error(item.index, epoch)
            status, kind, error_type, message = error or ("succeeded", "", "", "")
            records.append(
                ResultRecord(
                    item_id=item.pk,
                    item_index=item.index,
                    epoch=epoch,
                    status=status,
                    output=None if error else f"answer {item.index}",
                    attempts=[{"number": 1, "outcome": "error" if error else "ok"}],
                    started_at=now,
                    finished_at=now,
                    error_kind=kind,
                    error_type=error_type,
                    error_message=message,
                    scores=[] if error else _scores(item.index, epoch, flip),
                )
            )
    store.results_write(run.pk, records)
    store.run_finish(run.pk, cancelled=True)
    run.refresh_from_db()
    return run
