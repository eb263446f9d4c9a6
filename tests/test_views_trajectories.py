"""A result's trajectory on its page and in the API, and one item's
trajectories across runs side by side: paged, scoped to the project,
payloads shown as text."""

from __future__ import annotations

import html

import pytest
from django.test import Client
from django.urls import reverse

from runs.models import Item
from runs.models.steps import STEP_PAYLOAD_BYTES
from tests.factories import arithmetic_items, make_dataset
from tests.trajectories.steps import (
    answered_run,
    model_step,
    result_of,
    store_steps,
    tool_step,
)

API = "/api/v1"


@pytest.fixture
def run(dataset):
    return answered_run(dataset)


def page_of_result(client: Client, result, query: str = "") -> str:
    url = reverse("runs:result_detail", args=[result.run_id, result.pk]) + query
    response = client.get(url)
    assert response.status_code == 200
    return response.content.decode()


def test_the_result_page_shows_each_step_with_its_figures(victor_client, run) -> None:
    result = result_of(run)
    store_steps(
        result,
        [
            model_step(
                prompt_tokens=12, completion_tokens=5, cost=0.0003, latency_ms=80
            ),
            tool_step("search", {"q": "paris"}, output="Paris is...", latency_ms=12.5),
            tool_step("fetch", {"url": "x"}, error="HTTP 500", error_type="ToolError"),
        ],
    )

    page = page_of_result(victor_client, result)

    assert 'id="trajectory"' in page
    assert "3 steps · 1 model call · 2 tool calls" in page
    assert "12 + 5 tokens" in page and "$0.000300" in page
    assert "12.5 ms" in page
    assert 'id="trajectory-errors">1 error' in page
    assert page.count("step-error") == 1
    assert html.escape('{"q": "paris"}') in page


def test_a_result_without_steps_has_no_trajectory_section(victor_client, run) -> None:
    assert 'id="trajectory"' not in page_of_result(victor_client, result_of(run))


def test_a_long_trajectory_is_shown_a_page_at_a_time(victor_client, run) -> None:
    result = result_of(run)
    store_steps(result, [tool_step("step", {"n": n}) for n in range(450)])

    first = page_of_result(victor_client, result)
    last = page_of_result(victor_client, result, "?steps=3")

    assert 'id="step-0"' in first and 'id="step-199"' in first
    assert 'id="step-200"' not in first
    assert "page 1 of 3" in first
    assert 'href="?steps=2#trajectory"' in first
    assert 'id="step-400"' in last and 'id="step-449"' in last
    assert 'id="step-399"' not in last
    # Anything but a page number shows the first page.
    assert 'id="step-0"' in page_of_result(victor_client, result, "?steps=x")


def test_a_payload_is_shown_as_text_never_as_markup(victor_client, run) -> None:
    result = result_of(run)
    hostile = "<script>alert('x')</script>"
    store_steps(result, [tool_step("fetch", {"url": hostile}, output=hostile)])

    page = page_of_result(victor_client, result)

    assert hostile not in page
    assert html.escape(hostile) in page


def test_a_cut_payload_says_so_with_its_full_size(victor_client, run) -> None:
    result = result_of(run)
    huge = "x" * (3 * STEP_PAYLOAD_BYTES)
    store_steps(result, [tool_step("read", {"path": "a"}, output=huge)])

    page = page_of_result(victor_client, result)

    assert "step-cut" in page
    assert "cut · 48.0\xa0KB in all" in page


def test_another_projects_result_and_trajectory_are_not_found(
    mallory_client, run
) -> None:
    result = result_of(run)
    store_steps(result, [tool_step("search")])

    url = reverse("runs:result_detail", args=[run.pk, result.pk])
    assert mallory_client.get(url).status_code == 404
    assert (
        mallory_client.get(f"{API}/results/{result.pk}/trajectory").status_code == 404
    )


def test_the_api_gives_a_page_of_steps_with_the_totals(victor_client, run) -> None:
    result = result_of(run)
    steps = [model_step(prompt_tokens=3, completion_tokens=1)]
    steps += [tool_step("t", {"n": n}) for n in range(250)]
    store_steps(result, steps)

    body = victor_client.get(f"{API}/results/{result.pk}/trajectory?page=2").json()

    assert (body["page"], body["pages"], body["per_page"]) == (2, 2, 200)
    assert body["totals"]["steps"] == 251
    assert body["totals"]["tool_calls"] == 250
    assert body["totals"]["prompt_tokens"] == 3
    assert [s["index"] for s in body["steps"]] == list(range(200, 251))
    assert body["steps"][0]["arguments"] == {"n": 199}
    assert body["steps"][0]["cut"] is False


# -- the diff ----------------------------------------------------------------------


@pytest.fixture
def three_runs(dataset):
    """Three runs of one item: the second changes an argument, the third
    inserts a call."""
    runs = [answered_run(dataset, name=f"r{n}") for n in range(3)]
    base = [
        model_step(),
        tool_step("search", {"q": "a"}),
        model_step(),
        tool_step("fetch", {"page": 1}),
        model_step(),
    ]
    changed = [dict(step) for step in base]
    changed[3] = tool_step("fetch", {"page": 2})
    inserted = [*base[:2], tool_step("search", {"q": "b"}), *base[2:]]
    for run, steps in zip(runs, (base, changed, inserted), strict=True):
        store_steps(result_of(run), steps)
    return runs


def diff_of(client: Client, item: Item, runs, **extra) -> dict:
    ids = ",".join(str(run.pk) for run in runs)
    response = client.get(f"{API}/trajectories/diff", {"item": item.pk, "runs": ids})
    assert response.status_code == 200, response.content
    return response.json()


def test_the_diff_aligns_and_marks_the_first_divergence(victor_client, three_runs):
    item = Item.objects.get(dataset=three_runs[0].dataset, index=0)

    body = diff_of(victor_client, item, three_runs)

    cells = [
        [None if cell is None else cell["index"] for cell in row["cells"]]
        for row in body["rows"]
    ]
    assert cells == [
        [0, 0, 0],
        [1, 1, 1],
        [None, None, 2],  # the third run's extra search
        [2, 2, 3],
        [3, 3, 4],  # the second run's fetch of another page
        [4, 4, 5],
    ]
    assert [row["same"] for row in body["rows"]] == [
        True, True, False, True, False, True,
    ]  # fmt: skip
    assert body["first_divergence"] == 2
    assert [c["steps"] for c in body["columns"]] == [5, 5, 6]
    assert body["rows"][4]["cells"][1]["arguments"] == {"page": 2}


def test_the_same_trajectories_never_diverge(victor_client, dataset) -> None:
    runs = [answered_run(dataset, name=f"r{n}") for n in range(2)]
    for run in runs:
        store_steps(result_of(run), [tool_step("a", {"x": 1}), model_step()])
    item = Item.objects.get(dataset=dataset, index=0)

    body = diff_of(victor_client, item, runs)

    assert body["first_divergence"] is None
    assert all(row["same"] for row in body["rows"])


def test_model_calls_match_any_model_call_and_tool_calls_their_tool_and_arguments(
    victor_client, dataset
) -> None:
    runs = [answered_run(dataset, name=f"r{n}") for n in range(2)]
    store_steps(
        result_of(runs[0]),
        [model_step(name="model-a"), tool_step("a", {"x": 1}), tool_step("b", {})],
    )
    store_steps(
        result_of(runs[1]),
        [model_step(name="model-b"), tool_step("a", {"x": 1}), tool_step("c", {})],
    )
    item = Item.objects.get(dataset=dataset, index=0)

    body = diff_of(victor_client, item, runs)

    assert [row["same"] for row in body["rows"]] == [True, True, False]
    assert body["first_divergence"] == 2


def test_the_diff_follows_the_step_index_not_the_order_of_storage(
    victor_client, dataset
) -> None:
    runs = [answered_run(dataset, name=f"r{n}") for n in range(2)]
    steps = [tool_step(name, {}) for name in "abcd"]
    store_steps(result_of(runs[0]), steps)
    # Stored last step first (as spans may arrive): the same trajectory.
    store_steps(result_of(runs[1]), steps[::-1], indexes=[3, 2, 1, 0])
    item = Item.objects.get(dataset=dataset, index=0)

    body = diff_of(victor_client, item, runs)

    assert body["first_divergence"] is None
    assert [[cell["name"] for cell in row["cells"]] for row in body["rows"]] == [
        ["a", "a"], ["b", "b"], ["c", "c"], ["d", "d"],
    ]  # fmt: skip


def test_the_diff_page_shows_the_runs_side_by_side(victor_client, three_runs) -> None:
    item = Item.objects.get(dataset=three_runs[0].dataset, index=0)
    ids = ",".join(str(run.pk) for run in three_runs)

    response = victor_client.get(
        reverse("runs:trajectory_diff"), {"item": item.pk, "runs": ids}
    )

    page = response.content.decode()
    assert response.status_code == 200
    assert "They diverge at row 2" in page
    assert page.count('id="first-divergence"') == 1
    assert page.count('class="differs"') == 2
    assert html.escape('{"page": 2}') in page


def test_a_run_given_twice_is_shown_twice_and_one_without_the_item_as_gaps(
    victor_client, project, dataset, three_runs
) -> None:
    item = Item.objects.get(dataset=dataset, index=0)
    # A run over another version of the dataset, without this item.
    other = make_dataset(project, arithmetic_items(1), name=dataset.name, version=2)
    Item.objects.filter(dataset=other).update(external_id="elsewhere")
    without = answered_run(other, name="without")

    body = diff_of(victor_client, item, [three_runs[1], three_runs[1], without])

    assert [c["steps"] for c in body["columns"]] == [5, 5, 0]
    assert body["columns"][2]["result"] is None
    assert [row["cells"][2] for row in body["rows"]] == [None] * 5
    assert [row["cells"][0] == row["cells"][1] for row in body["rows"]] == [True] * 5
    assert body["first_divergence"] == 0


def test_a_diff_needs_two_runs_and_names_the_field(victor_client, run) -> None:
    item = Item.objects.get(dataset=run.dataset, index=0)

    response = victor_client.get(
        f"{API}/trajectories/diff", {"item": item.pk, "runs": str(run.pk)}
    )
    page = victor_client.get(
        reverse("runs:trajectory_diff"), {"item": item.pk, "runs": "x"}
    )

    assert response.status_code == 400
    assert response.json()["field"] == "runs"
    assert page.status_code == 400


def test_a_diff_of_another_projects_runs_is_not_found(
    mallory_client, three_runs
) -> None:
    item = Item.objects.get(dataset=three_runs[0].dataset, index=0)
    ids = ",".join(str(run.pk) for run in three_runs)

    api = mallory_client.get(f"{API}/trajectories/diff", {"item": item.pk, "runs": ids})
    page = mallory_client.get(
        reverse("runs:trajectory_diff"), {"item": item.pk, "runs": ids}
    )

    assert (api.status_code, page.status_code) == (404, 404)


def test_an_item_of_another_dataset_is_not_found(victor_client, project, three_runs):
    other = make_dataset(project, arithmetic_items(2), name="other")
    item = Item.objects.get(dataset=other, index=0)

    body = victor_client.get(
        f"{API}/trajectories/diff",
        {"item": item.pk, "runs": f"{three_runs[0].pk},{three_runs[1].pk}"},
    )

    assert body.status_code == 404


def test_the_comparison_links_each_item_to_its_diff(victor_client, three_runs):
    baseline, candidate = three_runs[0], three_runs[1]
    url = reverse("runs:compare")

    page = victor_client.get(
        url, {"baseline": baseline.pk, "candidates": str(candidate.pk)}
    ).content.decode()

    item = Item.objects.get(dataset=baseline.dataset, index=0)
    link = (
        f"{reverse('runs:trajectory_diff')}?item={item.pk}&amp;"
        f"runs={baseline.pk},{candidate.pk}"
    )
    assert link in page
