"""Server time of the next-item request on a 10,000-item, 3-rater review queue.

Seeds a scratch database as ``analysis_bench.py`` does (a temporary SQLite
file, or with ``DATABASE_URL`` a scratch PostgreSQL database, dropped at the
end) with a finished run of ``--items`` items and a review queue over all of
it with 3 raters. Three reviewers have labelled every item but the last
``--open`` (30,000 labels less a few), so those items are full; then, in
process, best and median of ``--repeat`` requests, each followed (untimed) by
the label that frees the reviewer for the next one:

- ``POST /api/v1/review-queues/{id}/next`` by a fourth reviewer, who must
  skip every full item;
- the same by one of the three, who must skip the items they labelled;
- ``GET /review/{id}/`` (the page's link: the claim and its redirect) and the
  review page it leads to;
- ``PUT .../labels/{id}`` (the label, its history and the consensus score);
- ``GET /api/v1/review-queues/{id}/agreement`` by an editor (the label
  matrix, every statistic with 1,000 bootstrap replicates, the disputed
  items; the raters disagree on about a third of the items) and the
  agreement page.

    .venv/bin/python bench/review_next.py [--items 10000] [--repeat 20]
    DATABASE_URL=postgres://... .venv/bin/python bench/review_next.py

Goal: under 0.3 s each.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from collections.abc import Callable
from typing import Any

from analysis_bench import run_in_scratch, seed_analysis

GOAL_SECONDS = 0.3
RATERS = 3


def _prefill(queue: Any, users: list[Any], open_items: int) -> None:
    """Every item but the last ``open_items`` labelled by each of ``users``."""
    from django.db import transaction
    from django.utils import timezone

    from runs.models import ReviewItem, ReviewLabel

    now = timezone.now()
    items = list(ReviewItem.objects.filter(queue=queue).order_by("position"))
    full = items[: len(items) - open_items]
    with transaction.atomic():
        ReviewLabel.objects.bulk_create(
            (
                ReviewLabel(
                    queue=queue, review_item=item, reviewer=user,
                    value="fail" if (item.position + n) % 7 == 0 else "pass",
                    assigned_at=now, submitted_at=now, updated_at=now,
                )
                for item in full
                for n, user in enumerate(users)
            ),
            batch_size=5_000,
        )  # fmt: skip
        ReviewItem.objects.filter(pk__in=[i.pk for i in full]).update(taken=len(users))


def _timed(
    repeat: int, call: Callable[[], Any], after: Callable[[Any], None]
) -> list[float]:
    spent = []
    for _ in range(repeat):
        began = time.perf_counter()
        answer = call()
        spent.append(time.perf_counter() - began)
        after(answer)
    return spent


def run(args: argparse.Namespace) -> None:
    import django
    from django.core.management import call_command
    from django.db import connection
    from django.test import Client

    django.setup()
    call_command("migrate", verbosity=0)
    from django.contrib.auth.models import User

    from runs.models import Membership
    from runs.review.services import queue_create

    begin = time.perf_counter()
    seeded = seed_analysis(items=args.items)
    run_ = seeded.baseline
    queue = queue_create(user=seeded.user, run=run_, name="bench", raters=RATERS)
    users = []
    for n in range(RATERS + 1):
        user = User.objects.create_user(f"reviewer{n}")
        Membership.objects.create(project=run_.project, user=user, role="viewer")
        users.append(user)
    _prefill(queue, users[:RATERS], args.open)
    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            cursor.execute("ANALYZE")
    print(
        f"seeded {args.items:,} items, {RATERS} raters, "
        f"{(args.items - args.open) * RATERS:,} labels in "
        f"{time.perf_counter() - begin:.0f} s"
    )
    print(f"\n{args.label}")
    print(f"{'what':36} {'best s':>8} {'median s':>9} {'goal s':>7}")
    api = f"/api/v1/review-queues/{queue.pk}"

    def client_for(user: Any) -> Client:
        client = Client()
        client.force_login(user)
        return client

    def label(client: Client) -> Callable[[Any], None]:
        def give(response: Any) -> None:
            body = response.json()
            assert response.status_code == 200 and not body["done"], body
            client.put(
                f"{api}/labels/{body['item']['label']}",
                json.dumps({"value": "fail"}),
                content_type="application/json",
            )

        return give

    fresh, veteran = client_for(users[RATERS]), client_for(users[0])
    rows = [
        ("next, a new reviewer (skips full)", fresh),
        ("next, a reviewer of 3 (skips own)", veteran),
    ]
    repeat = min(args.repeat, args.open // 2)
    for what, client in rows:
        spent = _timed(repeat, lambda c=client: c.post(f"{api}/next"), label(client))
        _report(what, spent)
    page_client = client_for(users[1])
    pages: list[float] = []

    def page_then_label(response: Any) -> None:
        began = time.perf_counter()
        shown = page_client.get(response["Location"])
        pages.append(time.perf_counter() - began)
        assert shown.status_code == 200
        label_id = int(response["Location"].rstrip("/").rpartition("/")[2])
        began = time.perf_counter()
        page_client.put(
            f"{api}/labels/{label_id}",
            json.dumps({"value": "pass"}),
            content_type="application/json",
        )
        saves.append(time.perf_counter() - began)

    saves: list[float] = []
    spent = _timed(
        repeat, lambda: page_client.get(f"/review/{queue.pk}/"), page_then_label
    )
    _report("GET /review/{id}/ (claim, redirect)", spent)
    _report("review page", pages)
    _report("PUT label (history, consensus)", saves)
    editor = client_for(seeded.user)
    agreement = min(args.repeat, 5)

    def ok(response: Any) -> None:
        assert response.status_code == 200, response.content[:200]

    spent = _timed(agreement, lambda: editor.get(f"{api}/agreement"), ok)
    _report("GET agreement (API)", spent)
    spent = _timed(agreement, lambda: editor.get(f"/review/{queue.pk}/agreement/"), ok)
    _report("agreement page", spent)


def _report(what: str, spent: list[float]) -> None:
    best, median = min(spent), statistics.median(spent)
    verdict = "ok" if median < GOAL_SECONDS else "OVER GOAL"
    print(f"{what:36} {best:8.3f} {median:9.3f} {GOAL_SECONDS:7.1f}  {verdict}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.partition("\n\n")[0])
    parser.add_argument("--items", type=int, default=10_000)
    parser.add_argument("--open", type=int, default=60, help="items left to label")
    parser.add_argument("--repeat", type=int, default=20)
    parser.add_argument("--keep", action="store_true", help="keep the database")
    run_in_scratch(run, parser.parse_args())


if __name__ == "__main__":
    main()
