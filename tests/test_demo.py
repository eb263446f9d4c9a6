"""The demo run: "Start the demo run" starts it, through a POST with CSRF."""

from __future__ import annotations

import time

import pytest
from django.contrib.auth.models import User
from django.test import Client
from django.urls import reverse

from runs.demo.seed import demo_seed
from runs.models import Dataset, Project, Run, RunStatus, Target
from runs.projects.services import project_create
from runs.results.demo_offer import (
    DEMO_RUN_CONCURRENCY,
    DEMO_RUN_NAME,
    DemoOffer,
    run_demo_choice,
    run_demo_offer,
)
from tests.factories import arithmetic_items, make_dataset

pytestmark = pytest.mark.django_db

START = reverse("runs:run_demo_start")


@pytest.fixture
def demo_target(project: Project) -> Target:
    return Target.objects.create(
        project=project,
        name="Demo model",
        kind="demo",
        config={"min_latency_ms": 0, "max_latency_ms": 0, "transient_error_rate": 0},
    )


def test_the_runs_page_offers_the_demo_as_a_post_form(
    bob_client: Client, dataset: Dataset, demo_target: Target
) -> None:
    page = bob_client.get(reverse("runs:run_list")).content.decode()

    form = page[page.index(f'action="{START}"') - 40 :]
    form = form[: form.index("</form>")]
    assert 'method="post"' in form
    assert "csrfmiddlewaretoken" in form
    assert "Start the demo run" in form


@pytest.mark.django_db(transaction=True)
def test_start_the_demo_run_starts_it_and_opens_its_live_page(
    bob_client: Client, dataset: Dataset, demo_target: Target
) -> None:
    response = bob_client.post(START)

    run = Run.objects.get()
    assert response.status_code == 302
    assert response.url == reverse("runs:run_detail", args=[run.pk])
    assert (run.name, run.dataset, run.target) == (DEMO_RUN_NAME, dataset, demo_target)
    assert [s["kind"] for s in run.scorers] == ["exact_match"]
    assert run.options["concurrency"] == DEMO_RUN_CONCURRENCY
    assert run.created_by.username == "bob"
    deadline = time.monotonic() + 30
    while not run.is_final and time.monotonic() < deadline:
        time.sleep(0.05)
        run.refresh_from_db()
    assert run.is_final
    assert run.processed == dataset.item_count


@pytest.mark.django_db(transaction=True)
def test_the_demo_run_needs_no_network(
    bob_client: Client, dataset: Dataset, demo_target: Target, settings
) -> None:
    """`make run` allows no address for its demo: the demo model answers from
    inside the server."""
    settings.EVALSITE_TARGET_ALLOW = []  # nowhere at all

    bob_client.post(START)

    run = Run.objects.get()
    deadline = time.monotonic() + 30
    while not run.is_final and time.monotonic() < deadline:
        time.sleep(0.05)
        run.refresh_from_db()
    assert run.status == RunStatus.COMPLETED
    assert run.succeeded == dataset.item_count


def test_the_demo_run_uses_the_largest_arithmetic_dataset(
    bob_client: Client, project: Project, dataset: Dataset, demo_target: Target
) -> None:
    bigger = make_dataset(project, arithmetic_items(30), name="arithmetic-30")
    make_dataset(project, arithmetic_items(3), name="trivia")

    bob_client.post(START)

    assert Run.objects.get().dataset == bigger


def test_a_get_does_not_start_the_demo_run(
    bob_client: Client, dataset: Dataset, demo_target: Target
) -> None:
    assert bob_client.get(START).status_code == 405
    assert not Run.objects.exists()


def test_starting_the_demo_run_needs_the_csrf_token(
    bob: User, dataset: Dataset, demo_target: Target
) -> None:
    client = Client(enforce_csrf_checks=True)
    client.force_login(bob)

    assert client.post(START).status_code == 403
    assert not Run.objects.exists()


def test_a_viewer_cannot_start_the_demo_run(
    victor_client: Client, dataset: Dataset, demo_target: Target
) -> None:
    assert (
        "Start the demo run"
        not in victor_client.get(reverse("runs:run_list")).content.decode()
    )

    assert victor_client.post(START).status_code == 403
    assert not Run.objects.exists()


def test_an_outsider_cannot_start_anothers_demo_run(
    mallory_client: Client, dataset: Dataset, demo_target: Target
) -> None:
    assert mallory_client.post(START).status_code == 404
    assert not Run.objects.exists()


def test_anonymous_is_sent_to_log_in(
    client: Client, dataset: Dataset, demo_target: Target
) -> None:
    response = client.post(START)

    assert response.status_code == 302
    assert response.url.startswith(reverse("login"))
    assert not Run.objects.exists()


def test_no_demo_model_is_a_404(bob_client: Client, dataset: Dataset) -> None:
    assert bob_client.post(START).status_code == 404


def test_the_seeded_demo_user_can_start_the_demo_run() -> None:
    seed = demo_seed()
    client = Client()
    client.force_login(seed.user)

    response = client.post(START)

    run = Run.objects.get()
    assert response.url == reverse("runs:run_detail", args=[run.pk])
    assert run.dataset.name == "arithmetic-200"
    assert run.target.name == "Demo model"


def test_the_demo_choice_skips_projects_the_user_only_views(
    victor: User, dataset: Dataset, demo_target: Target
) -> None:
    own = project_create(name="Victor's", owner=victor)
    mine = make_dataset(own, arithmetic_items(2))
    target = Target.objects.create(project=own, name="demo", kind="demo", config={})

    assert run_demo_choice(user=victor) == (mine, target)


def test_a_demo_run_that_cannot_start_says_why_on_the_form(
    bob_client: Client, dataset: Dataset
) -> None:
    Target.objects.create(
        project=dataset.project, name="broken", kind="demo", config={"accuracy": 7}
    )

    response = bob_client.post(START, follow=True)

    assert response.redirect_chain[-1][0] == f"{reverse('runs:run_new')}?demo=1"
    assert "The demo run could not start" in response.content.decode()
    assert not Run.objects.exists()


@pytest.mark.parametrize(
    "extra",
    ["none", "bigger arithmetic", "no arithmetic", "bigger one importing", "versions"],
)
def test_the_demo_button_names_what_the_demo_run_starts(
    bob: User, project: Project, demo_target: Target, extra: str
) -> None:
    if extra == "no arithmetic":
        make_dataset(project, arithmetic_items(3), name="trivia")
        make_dataset(project, arithmetic_items(2), name="newest")
    else:
        make_dataset(project, arithmetic_items(3), name="arith-small")
        make_dataset(project, arithmetic_items(3), name="trivia")
        if extra == "bigger arithmetic":
            make_dataset(project, arithmetic_items(9), name="Arithmetic-9")
        if extra == "bigger one importing":
            importing = make_dataset(project, arithmetic_items(9), name="arith-9")
            Dataset.all_objects.filter(pk=importing.pk).update(
                status=Dataset.Status.IMPORTING
            )
        if extra == "versions":
            make_dataset(project, arithmetic_items(3), name="arith-small", version=2)

    offer = run_demo_offer(user=bob)
    dataset, target = run_demo_choice(user=bob)

    assert offer == DemoOffer(target.name, dataset.name, dataset.version)


def test_no_demo_button_for_a_viewer_or_without_a_dataset(
    victor: User, bob: User, project: Project, demo_target: Target
) -> None:
    assert run_demo_offer(user=bob) is None
    make_dataset(project, arithmetic_items(2))
    assert run_demo_offer(user=victor) is None
    assert run_demo_offer(user=bob) is not None
