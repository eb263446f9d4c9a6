"""A scoring pass: stored outputs scored again, the target never called."""

from __future__ import annotations

import asyncio
from datetime import timedelta
from typing import ClassVar

import pytest
from django.utils import timezone

from runs.analysis.summary import run_summary_cached
from runs.errors import ConfigError, Conflict
from runs.executor import rescore_store
from runs.executor.engine import execute_run
from runs.executor.rescore import execute_scoring_pass
from runs.executor.store import ScoreRecord
from runs.models import Result, Run, Score, ScoringPass
from runs.rescore.selectors import scoring_passes
from runs.rescore.services import run_rescore
from runs.scorers.base import ScoreOutcome, ScorerPlugin
from runs.scorers.llm_judge import LLMJudge
from tests.factories import arithmetic_items

pytestmark = pytest.mark.django_db(transaction=True)

HAS_DIGIT = {"kind": "regex", "name": "has_digit", "params": {"pattern": r"\d"}}


def ended_run(make_run, marks: dict[int, str] | None = None, **kwargs) -> Run:
    """Six arithmetic items, executed against the local server."""
    items = arithmetic_items(6)
    for index, marker in (marks or {}).items():
        items[index]["input"] += marker
    run = make_run(items, max_attempts=1, **kwargs)
    asyncio.run(execute_run(run.pk))
    run.refresh_from_db()
    return run


def rescored(run: Run, scorers: list, user=None) -> ScoringPass:
    plan = run_rescore(run=run, user=user, scorers=scorers, launch=False)
    assert plan.scoring_pass is not None
    asyncio.run(execute_scoring_pass(plan.scoring_pass.pk))
    plan.scoring_pass.refresh_from_db()
    run.refresh_from_db()
    return plan.scoring_pass


def scores_of(run: Run, scorer: str) -> dict[int, tuple]:
    return {
        s.result.item_index: (s.value, s.passed, s.error)
        for s in Score.objects.filter(result__run=run, scorer=scorer).select_related(
            "result"
        )
    }


def test_an_added_scorer_scores_every_output_without_calling_the_target(
    make_run, fake_openai, alice, project
):
    run = ended_run(make_run, {1: "[[wrong]]", 4: "[[status:400]]"})
    assert (run.succeeded, run.failed) == (5, 1)
    requests = fake_openai.stats.requests

    scoring = rescored(run, [HAS_DIGIT], user=alice)

    assert fake_openai.stats.requests == requests
    assert (scoring.status, scoring.total, scoring.scored, scoring.errored) == (
        "completed",
        5,
        5,
        0,
    )
    assert scores_of(run, "has_digit") == {i: (1.0, True, "") for i in (0, 1, 2, 3, 5)}
    # The failed result is left as it was: no output, no scores.
    failed = Result.objects.get(run=run, item_index=4)
    assert failed.status == "failed" and not failed.scores.exists()
    assert scores_of(run, "exact_match")[1] == (0.0, False, "")
    assert run.scorer_names == ["exact_match", "has_digit"]
    assert run.scorers[1] == HAS_DIGIT | {
        "params": {"pattern": r"\d", "mode": "search", "ignore_case": False}
    }


def test_a_scorer_replaced_by_name_changes_only_its_scores(make_run, fake_openai):
    run = ended_run(make_run, {1: "[[wrong]]"}, scorers=["exact_match", "includes"])
    includes_before = set(
        Score.objects.filter(result__run=run, scorer="includes").values_list(
            "pk", "value", "passed", "reason"
        )
    )
    assert scores_of(run, "exact_match")[1][1] is False

    # Another kind under the same name: allowed, and the run's list says so.
    scoring = rescored(
        run, [{"kind": "regex", "name": "exact_match", "params": {"pattern": "^1"}}]
    )

    assert scoring.scored == 6
    assert {i: v[1] for i, v in scores_of(run, "exact_match").items()} == {
        0: False,
        1: False,
        2: False,
        3: False,
        4: True,  # 12
        5: True,  # 15
    }
    after = Score.objects.filter(result__run=run, scorer="includes")
    assert set(after.values_list("pk", "value", "passed", "reason")) == includes_before
    assert [(s["name"], s["kind"]) for s in run.scorers] == [
        ("exact_match", "regex"),
        ("includes", "includes"),
    ]
    assert Score.objects.filter(result__run=run).count() == 12


def test_the_same_pass_run_twice_leaves_the_same_rows(make_run, fake_openai):
    run = ended_run(make_run)
    rescored(run, [HAS_DIGIT])
    rows = set(Score.objects.filter(result__run=run).values_list("pk", "scorer"))
    rescored(run, [HAS_DIGIT])
    assert set(Score.objects.filter(result__run=run).values_list("pk", "scorer")) == (
        rows
    )
    assert [p.status for p in scoring_passes(run=run)] == ["completed"] * 3


def test_the_first_rescore_records_the_run_itself_as_the_first_pass(
    make_run, fake_openai, alice
):
    run = ended_run(make_run, {2: "[[status:400]]"})
    shown = scoring_passes(run=run)
    assert [(p.pk, p.initial, p.scored) for p in shown] == [(None, True, 5)]

    rescored(run, [HAS_DIGIT], user=alice)

    first, second = scoring_passes(run=run)
    assert (first.initial, first.scorers[0]["name"], first.scored) == (
        True,
        "exact_match",
        5,
    )
    assert first.created_at == run.created_at
    assert (second.initial, second.user, second.scorer_names) == (
        False,
        alice,
        ["has_digit"],
    )
    assert second.started_at and second.finished_at >= second.started_at


class BrokenScorer(ScorerPlugin):
    kind = "broken_for_test"
    label = "Broken"

    def __init__(self, name, params):
        self.name = name

    def score(self, *, output, item):
        if item.index % 2:
            raise ValueError(f"cannot score item {item.index}")
        return ScoreOutcome(value=1.0, passed=True, reason="fine")


def test_a_scorer_error_is_stored_and_hides_no_other_scorer(
    make_run, fake_openai, monkeypatch
):
    from runs.scorers import base

    monkeypatch.setitem(base.REGISTRY, BrokenScorer.kind, BrokenScorer)
    run = ended_run(make_run)

    scoring = rescored(run, ["broken_for_test", HAS_DIGIT])

    assert (scoring.status, scoring.scored, scoring.errored) == ("completed", 6, 3)
    broken = scores_of(run, "broken_for_test")
    assert broken[1] == (None, None, "ValueError: cannot score item 1")
    assert broken[0] == (1.0, True, "")
    assert set(scores_of(run, "has_digit").values()) == {(1.0, True, "")}


def test_the_summary_follows_the_new_scores(make_run, fake_openai):
    run = ended_run(make_run, {1: "[[wrong]]", 3: "[[wrong]]"})
    before = run_summary_cached(run=run)
    version = run.results_version
    assert before.scorers[0].passed == 4

    rescored(
        run, [{"kind": "regex", "name": "exact_match", "params": {"pattern": "1$"}}]
    )

    assert run.results_version != version
    after = run_summary_cached(run=run)
    # 0, 3+"1", 6, 9+"1", 12, 15 end in 1 for the two wrong answers only.
    assert [s.scorer for s in after.scorers] == ["exact_match"]
    assert after.scorers[0].passed == 2
    failing = Score.objects.filter(result__run=run, passed=False)
    assert failing.count() == 4
    assert all(s.reason_signature for s in failing)


def test_a_pass_cut_short_is_shown_interrupted_and_runs_again(make_run, fake_openai):
    run = ended_run(make_run)
    plan = run_rescore(run=run, user=None, scorers=[HAS_DIGIT], launch=False)
    scoring = plan.scoring_pass
    spec = rescore_store.pass_claim(scoring.pk)
    assert spec is not None
    # One result scored, then the process died: no heartbeat since.
    first = Result.objects.filter(run=run).order_by("pk").first()
    rescore_store.pass_scores_write(
        scoring.pk, run.pk, [(first.pk, [ScoreRecord("has_digit", 1.0, True)])]
    )
    with pytest.raises(Conflict, match="being re-scored"):
        run_rescore(run=Run.objects.get(pk=run.pk), user=None, scorers=[HAS_DIGIT])
    long_ago = timezone.now() - timedelta(minutes=5)
    ScoringPass.objects.filter(pk=scoring.pk).update(heartbeat_at=long_ago)
    scoring.refresh_from_db()
    assert scoring.stale and scoring.status == "running"

    again = rescored(Run.objects.get(pk=run.pk), [HAS_DIGIT])

    scoring.refresh_from_db()
    assert scoring.status == "interrupted" and "run it again" in scoring.error
    assert (again.status, again.scored) == ("completed", 6)
    assert Score.objects.filter(result__run=run, scorer="has_digit").count() == 6


def test_a_running_run_cannot_be_rescored(make_run, fake_openai):
    run = make_run(arithmetic_items(2))
    with pytest.raises(Conflict, match="still pending"):
        run_rescore(run=run, user=None, scorers=[HAS_DIGIT])
    assert not ScoringPass.objects.exists()


def test_empty_and_unicode_outputs_are_scored_under_a_unicode_name(
    make_run, fake_openai
):
    items = arithmetic_items(6)
    items[0]["input"] += "[[empty]]"
    items[1]["input"] = " «ünïcödé» 🙂 "  # echoed back
    run = make_run(items, max_attempts=1)
    asyncio.run(execute_run(run.pk))
    run.refresh_from_db()
    assert Result.objects.get(run=run, item_index=1).output == "«ünïcödé» 🙂"
    digits = {"kind": "regex", "name": "chiffres-é", "params": {"pattern": "^\\d+$"}}

    scoring = rescored(run, [digits])

    assert (scoring.status, scoring.scored, scoring.errored) == ("completed", 6, 0)
    scores = scores_of(run, "chiffres-é")
    assert scores[0][1] is False  # the empty output is scored, and fails
    assert scores[1][1] is False  # echoed unicode is no number
    assert scores[2] == (1.0, True, "")


class SlowJudge(ScorerPlugin):
    """Waits on I/O (async): runs on the loop, under the run's scorer timeout."""

    kind = "slow_judge_for_test"
    label = "Slow judge"

    def __init__(self, name, params):
        self.name = name

    async def score(self, *, output, item):
        if item.index == 0:
            await asyncio.sleep(30)
        return ScoreOutcome(value=0.5, passed=None, reason=f"judged {output}")


def test_an_async_scorer_runs_under_the_runs_scorer_timeout(
    make_run, fake_openai, monkeypatch
):
    from runs.scorers import base

    monkeypatch.setitem(base.REGISTRY, SlowJudge.kind, SlowJudge)
    run = ended_run(make_run, scorer_timeout_seconds=0.3)

    scoring = rescored(run, ["slow_judge_for_test"])

    assert (scoring.status, scoring.scored, scoring.errored) == ("completed", 6, 1)
    judged = scores_of(run, "slow_judge_for_test")
    assert judged[0] == (None, None, "scorer exceeded 0.3 s")
    assert judged[2] == (0.5, None, "")


def test_a_condition_on_a_scorer_the_pass_leaves_reads_its_stored_score(
    make_run, fake_openai
):
    # The costly check only where the run's exact match failed.
    run = ended_run(make_run, {1: "[[wrong]]", 3: "[[wrong]]"})
    only_failed = HAS_DIGIT | {"when": {"scorer": "exact_match", "passed": False}}

    rescored(run, [only_failed])

    skipped = dict(
        Score.objects.filter(result__run=run, scorer="has_digit").values_list(
            "result__item_index", "skipped"
        )
    )
    assert skipped == {0: True, 1: False, 2: True, 3: False, 4: True, 5: True}
    reasons = set(
        Score.objects.filter(
            result__run=run, scorer="has_digit", skipped=True
        ).values_list("reason", flat=True)
    )
    assert reasons == {"skipped: exact_match passed"}
    assert run.scorers[-1]["when"] == {"scorer": "exact_match", "passed": False}


def test_a_replaced_score_keeps_nothing_of_the_old_one(make_run, fake_openai):
    run = ended_run(make_run, {1: "[[wrong]]"})
    only_failed = HAS_DIGIT | {"when": {"scorer": "exact_match", "passed": False}}
    rescored(run, [only_failed])
    assert Score.objects.filter(result__run=run, skipped=True).count() == 5

    rescored(run, [HAS_DIGIT])

    assert not Score.objects.filter(result__run=run, skipped=True).exists()
    assert "when" not in run.scorers[-1]


def test_a_pass_orders_its_scorers_as_the_run_will_list_them(make_run, fake_openai):
    # The new scorer is conditioned on one the same pass replaces, listed
    # after it: the pass scores the replaced one first.
    run = ended_run(make_run, {1: "[[wrong]]"})
    replaced = {"kind": "includes", "name": "exact_match"}
    conditioned = HAS_DIGIT | {"when": {"scorer": "exact_match", "passed": True}}

    rescored(run, [conditioned, replaced])

    assert run.scorer_names == ["exact_match", "has_digit"]
    assert (
        Score.objects.filter(result__run=run, scorer="has_digit", skipped=False).count()
        == Score.objects.filter(
            result__run=run, scorer="exact_match", passed=True
        ).count()
    )


def test_a_condition_on_no_scorer_of_the_run_names_the_field(make_run, fake_openai):
    run = ended_run(make_run)
    dangling = HAS_DIGIT | {"when": {"scorer": "judge", "passed": False}}

    with pytest.raises(ConfigError) as refused:
        run_rescore(run=run, user=None, scorers=[dangling], launch=False)

    assert refused.value.field == "scorers[0].when.scorer"


def test_a_rescored_judges_cost_is_added_to_its_result_and_run(
    make_run, fake_openai, settings
):
    settings.EVALSITE_PRICES = {"fake": (1.0, 2.0), "fake-judge": (3.0, 4.0)}
    run = ended_run(make_run, {1: "[[wrong]]"})
    before = dict(Result.objects.filter(run=run).values_list("pk", "cost"))
    assert run.cost == pytest.approx(sum(before.values()))
    judge = {
        "kind": "llm_judge",
        "params": {"base_url": fake_openai.base_url, "model": "fake-judge"},
    }

    rescored(run, [judge])

    judged = dict(
        Score.objects.filter(result__run=run, scorer="llm_judge").values_list(
            "result_id", "cost"
        )
    )
    assert len(judged) == 6 and all(cost for cost in judged.values())
    after = dict(Result.objects.filter(run=run).values_list("pk", "cost"))
    for pk, cost in after.items():
        assert cost == pytest.approx(before[pk] + judged[pk])
    assert run.cost == pytest.approx(sum(after.values()))

    # Run again (a crash, a second pass of the same judge): the same figures.
    rescored(run, [judge])
    again = dict(Result.objects.filter(run=run).values_list("pk", "cost"))
    assert again == pytest.approx(after)


class KeptJudge(LLMJudge):
    """The real judge, kept where the test can see its HTTP session."""

    kind = "kept_judge_for_test"
    built: ClassVar[list[LLMJudge]] = []

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        KeptJudge.built.append(self)


def test_a_pass_closes_its_judges_http_session(make_run, fake_openai, monkeypatch):
    from runs.scorers import base

    monkeypatch.setitem(base.REGISTRY, KeptJudge.kind, KeptJudge)
    monkeypatch.setattr(KeptJudge, "built", [])
    run = ended_run(make_run)
    judge = {
        "kind": KeptJudge.kind,
        "params": {"base_url": fake_openai.base_url, "model": "fake-judge"},
    }

    scoring = rescored(run, [judge])

    assert (scoring.status, scoring.scored) == ("completed", 6)
    (kept,) = KeptJudge.built
    pool = kept.client.client.pool
    assert pool is not None and pool.closed
