"""A run whose results have every status, stored as the executor stores them."""

from __future__ import annotations

from django.utils import timezone

from runs import services
from runs.executor import store
from runs.executor.store import ResultRecord, ScoreRecord
from runs.models import Dataset, ErrorKind, Item, Run

# index: (status, error kind, signature, exact_match score as (passed, error))
MIXED = {
    0: ("succeeded", "", "", (True, "")),
    1: ("succeeded", "", "", (True, "")),
    2: ("succeeded", "", "", (False, "")),
    3: ("succeeded", "", "", (None, "ValueError: boom")),
    4: ("failed", ErrorKind.TRANSIENT, "sig-a", None),
    5: ("failed", ErrorKind.TRANSIENT, "sig-a", None),
    6: ("timed_out", ErrorKind.TIMEOUT, "sig-b", None),
}
UNSTORED = (7, 8, 9)  # of the ten items of the ``dataset`` fixture


def mixed_run(dataset: Dataset, *, ended: bool = False) -> Run:
    """A run of ``dataset`` with the MIXED results stored; the rest pending
    (or skipped, once ``ended``: cancelled)."""
    run = services.run_create(
        user=None,
        dataset=dataset,
        target_kind="openai_chat",
        target_config={"base_url": "http://127.0.0.1:9/v1", "model": "m"},
        scorers=["exact_match"],
        options={"max_attempts": 2},
        launch=False,
    )
    now = timezone.now()
    records = []
    for item in Item.objects.filter(dataset=dataset, index__in=MIXED):
        status, kind, signature, score = MIXED[item.index]
        scores = []
        if score is not None:
            passed, error = score
            value = None if error else float(passed)
            scores = [ScoreRecord("exact_match", value, passed, error=error)]
        records.append(
            ResultRecord(
                item_id=item.pk,
                item_index=item.index,
                epoch=0,
                status=status,
                output="out" if status == "succeeded" else None,
                attempts=[{"number": 1, "outcome": "ok" if not kind else "error"}],
                started_at=now,
                finished_at=now,
                error_kind=kind,
                error_type="HTTP 500" if kind else "",
                error_message="boom" if kind else "",
                error_signature=signature,
                scores=scores,
            )
        )
    store.results_write(run.pk, records)
    if ended:
        store.run_finish(run.pk, cancelled=True)
    run.refresh_from_db()
    return run
