"""The review pages: blind until labelled, keyboard-ready, scoped to the project."""

from __future__ import annotations

import json

from django.urls import reverse

from runs.models import ReviewLabel
from runs.review.services import label_next, label_save, queue_create
from tests.review.builders import (
    JUDGE_REASON,
    MODEL_NAME,
    RUN_NAME,
    TARGET_NAME,
    ended_run,
)

SECRETS = (RUN_NAME, TARGET_NAME, MODEL_NAME, JUDGE_REASON)


def review(client, queue):
    """Follow the queue's link to the reviewer's next item."""
    response = client.get(reverse("runs:review_next", args=[queue.pk]))
    assert response.status_code == 302, response.content
    return client.get(response["Location"])


def test_the_page_names_no_run_target_model_judge_or_other_label(
    alice, bob, victor_client, victor, dataset
):
    queue = queue_create(user=bob, run=ended_run(dataset), name="blind", raters=3)
    # Two others label every item first, with a note a leak would show.
    for user in (alice, bob):
        while (label := label_next(user=user, queue=queue)) is not None:
            label_save(user=user, label=label, value="fail", note=f"note-of-{user}")
    html = review(victor_client, queue).content.decode()
    assert "What is 0 + 0?" in html  # the input
    assert "answer 0" in html  # the output
    for secret in (*SECRETS, "note-of-alice", "note-of-bob", "exact_match"):
        assert secret not in html, secret
    assert "alice" not in html and "bob" not in html


def test_once_labelled_the_page_shows_what_was_hidden(
    alice, bob, victor, victor_client, dataset
):
    queue = queue_create(user=bob, run=ended_run(dataset), name="blind", raters=2)
    mine = label_next(user=alice, queue=queue)
    label_save(user=alice, label=mine, value="pass", note="note-of-alice")
    theirs = label_next(user=victor, queue=queue)
    label_save(user=victor, label=theirs, value="fail")
    html = victor_client.get(
        reverse("runs:review_label", args=[queue.pk, theirs.pk])
    ).content.decode()
    for secret in (RUN_NAME, TARGET_NAME, MODEL_NAME, "note-of-alice"):
        assert secret in html, secret


def test_an_api_item_is_blind_too(alice, bob, victor_client, dataset):
    queue = queue_create(user=bob, run=ended_run(dataset), name="blind", raters=2)
    label = label_next(user=alice, queue=queue)
    label_save(user=alice, label=label, value="pass", note="note-of-alice")
    response = victor_client.post(f"/api/v1/review-queues/{queue.pk}/next")
    assert response.status_code == 200
    text = response.content.decode()
    for secret in (*SECRETS, "note-of-alice", "exact_match"):
        assert secret not in text, secret
    assert response.json()["item"]["outputs"] == [
        {"side": "Output", "text": "answer 0"}
    ]


def test_a_comparison_page_shows_sides_not_runs(alice, bob, victor_client, dataset):
    run, other = ended_run(dataset), ended_run(dataset, name="Other-run-name")
    queue = queue_create(
        user=bob, run=run, other_run=other, name="pair", source="comparison"
    )
    html = review(victor_client, queue).content.decode()
    assert "Left" in html and "Right" in html
    for secret in (*SECRETS, "Other-run-name"):
        assert secret not in html, secret


def test_outputs_are_escaped_never_raw_html(bob, victor_client, dataset):
    run = ended_run(dataset)
    run.results.filter(item_index=0).update(
        output="<script>alert(1)</script>\n```python\nprint('<b>')\n```"
    )
    queue = queue_create(user=bob, run=run, name="safe")
    html = review(victor_client, queue).content.decode()
    assert "<script>alert(1)</script>" not in html
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in html


def test_the_page_gives_one_key_per_label(bob, victor_client, dataset):
    queue = queue_create(
        user=bob, run=ended_run(dataset), name="labels",
        rubric={"kind": "labels", "labels": ["wrong", "rude", "fine"]},
    )  # fmt: skip
    html = review(victor_client, queue).content.decode()
    for key, label in (("1", "wrong"), ("2", "rude"), ("3", "fine")):
        assert f'data-key="{key}" data-value="&quot;{label}&quot;"' in html
    assert 'src="/static/js/review.js"' in html


def test_an_outsider_cannot_see_or_label_another_projects_items(
    bob, mallory_client, dataset
):
    queue = queue_create(user=bob, run=ended_run(dataset), name="private")
    label = label_next(user=bob, queue=queue)
    api = f"/api/v1/review-queues/{queue.pk}"
    answers = [
        mallory_client.get(reverse("runs:review_next", args=[queue.pk])),
        mallory_client.get(reverse("runs:review_label", args=[queue.pk, label.pk])),
        mallory_client.get(api),
        mallory_client.post(f"{api}/next"),
        mallory_client.put(
            f"{api}/labels/{label.pk}",
            json.dumps({"value": "pass"}),
            content_type="application/json",
        ),
        mallory_client.post(
            f"{api}/labels",
            json.dumps({"item": label.review_item_id, "value": "pass"}),
            content_type="application/json",
        ),
        mallory_client.get(f"{api}/matrix"),
    ]
    assert [a.status_code for a in answers] == [404] * len(answers)
    listed = mallory_client.get("/api/v1/review-queues").json()
    assert listed == []
    assert (
        "private"
        not in mallory_client.get(reverse("runs:review_queue_list")).content.decode()
    )
    label.refresh_from_db()
    assert label.value is None and not ReviewLabel.objects.exclude(pk=label.pk).exists()


def test_a_member_cannot_open_another_reviewers_label(alice_client, bob, dataset):
    queue = queue_create(user=bob, run=ended_run(dataset), name="mine")
    label = label_next(user=bob, queue=queue)
    response = alice_client.get(reverse("runs:review_label", args=[queue.pk, label.pk]))
    assert response.status_code == 404
