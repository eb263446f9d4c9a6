"""A third-party plug-in listed in EVALSITE_PLUGINS is everywhere a built-in is."""

from __future__ import annotations

import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from django.apps import apps
from django.test import Client
from django.urls import reverse

from runs.management.commands.evalrun import Command
from runs.models import Project, Run
from runs.scorers import REGISTRY as SCORERS
from runs.scorers import build_scorer
from runs.targets import REGISTRY as TARGETS
from runs.targets import TargetInput, build_target
from tests.factories import make_dataset

API = "/api/v1"
README = (Path(__file__).resolve().parent.parent / "README.md").read_text()
PLUGINS = ["tests.thirdparty_plugins", "tests.thirdparty_plugins.Shouting"]


@pytest.fixture
def thirdparty(settings: Any) -> Iterator[None]:
    targets, scorers = dict(TARGETS), dict(SCORERS)
    sys.modules.pop("tests.thirdparty_plugins", None)  # register afresh
    settings.EVALSITE_PLUGINS = PLUGINS
    apps.get_app_config("runs").ready()
    yield
    for registry, saved in ((TARGETS, targets), (SCORERS, scorers)):
        registry.clear()
        registry.update(saved)


def test_setting_registers_a_module_and_a_class(thirdparty: None) -> None:
    assert TARGETS["parrot"].label == "Parrot"
    assert SCORERS["shouting"].label == "Shouting"


def test_a_bad_entry_in_the_setting_is_an_error(settings: Any) -> None:
    from django.core.exceptions import ImproperlyConfigured

    from runs.plugins import load_plugins

    with pytest.raises(ImproperlyConfigured, match="neither a target"):
        load_plugins(["tests.thirdparty_plugins.ParrotParams"])
    with pytest.raises(ModuleNotFoundError):
        load_plugins(["no_such_package.plugins"])


def test_a_class_that_does_not_declare_itself_is_refused() -> None:
    from django.core.exceptions import ImproperlyConfigured

    from runs.scorers.base import register

    class Bare:
        kind = "bare"

        async def score(self, *, output: Any, item: Any) -> None: ...

    with pytest.raises(ImproperlyConfigured, match="does not declare label, Params"):
        register(Bare)
    assert "bare" not in SCORERS


def test_thirdparty_plugins_are_in_the_catalogue_page(
    thirdparty: None, bob_client: Client
) -> None:
    page = bob_client.get(reverse("runs:catalogue")).content.decode()

    assert '<code class="muted">parrot</code>' in page
    assert "Share of letters that must be capitals." in page


def test_thirdparty_plugins_are_in_the_api_catalogue(
    thirdparty: None, bob_client: Client
) -> None:
    scorers = bob_client.get(f"{API}/scorers").json()
    kinds = bob_client.get(f"{API}/targets/kinds").json()

    shouting = next(s for s in scorers if s["kind"] == "shouting")
    assert shouting["needs_expected"] is False
    assert shouting["parameters"]["properties"]["min_ratio"]["maximum"] == 1
    parrot = next(k for k in kinds if k["kind"] == "parrot")
    assert parrot["example"] == {"prefix": "> ", "repeat": 2}


def test_thirdparty_plugins_are_in_the_forms_and_flags(
    thirdparty: None, bob_client: Client, project: Project
) -> None:
    run_page = bob_client.get(reverse("runs:run_new")).content.decode()
    target_page = bob_client.get(reverse("runs:target_list")).content.decode()
    parser = Command().create_parser("manage.py", "evalrun")
    flags = {flag for action in parser._actions for flag in action.option_strings}

    assert 'name="shouting__min_ratio"' in run_page
    assert 'name="parrot__repeat"' in target_page
    assert {"--prefix", "--repeat"} <= flags


@pytest.mark.django_db(transaction=True)
def test_a_run_of_thirdparty_plugins_from_the_form(
    thirdparty: None, bob_client: Client, project: Project
) -> None:
    dataset = make_dataset(
        project, [{"id": "a", "input": "HI"}, {"id": "b", "input": "hi"}]
    )
    bob_client.post(
        reverse("runs:target_list"),
        {"project": project.pk, "name": "p", "kind": "parrot", "parrot__repeat": "2"},
    )
    response = bob_client.post(
        reverse("runs:run_new"),
        {
            "dataset": dataset.pk,
            "target": project.targets.get(name="p").pk,
            "scorers": ["shouting"],
            "shouting__min_ratio": "0.9",
            "concurrency": 2,
        },
    )

    assert response.status_code == 302, response.context["form"].errors
    run = Run.objects.get()
    assert run.target_config == {"prefix": "", "repeat": 2}
    assert run.scorers[0]["params"] == {"min_ratio": 0.9}
    deadline = time.monotonic() + 30
    while not Run.objects.get(pk=run.pk).is_final:
        assert time.monotonic() < deadline, "run did not finish"
        time.sleep(0.05)
    run.refresh_from_db()
    assert run.status == "completed"
    scores = dict(run.results.values_list("item__external_id", "scores__value"))
    assert scores == {"a": 1.0, "b": 0.0}


def readme_plugin_example() -> str:
    """The Python block of the README's plug-ins section."""
    section = README.split("## Plug-ins", 1)[1]
    return section.split("```python\n", 1)[1].split("```", 1)[0]


async def test_the_readme_example_loads_and_scores() -> None:
    saved = dict(SCORERS)
    namespace: dict[str, Any] = {"__name__": "readme_example"}
    try:
        exec(compile(readme_plugin_example(), "README.md", "exec"), namespace)
        scorer = build_scorer({"name": "short", "kind": "short", "params": {}})
        assert isinstance(scorer.params, namespace["ShortParams"])
        outcome = await scorer.score(output="x" * 100, item=None)
        assert outcome.passed is True
        assert (await scorer.score(output="x" * 101, item=None)).passed is False
    finally:
        SCORERS.clear()
        SCORERS.update(saved)


async def test_a_plugin_written_for_dict_params_still_scores(thirdparty: None) -> None:
    scorer = build_scorer({"name": "s", "kind": "shouting", "params": {}})
    outcome = await scorer.score(output="HELLO there", item=None)
    assert outcome.passed is True  # 5 of 10 letters: min_ratio 0.5, read as a key
    target = build_target("parrot", {"prefix": "> ", "repeat": 2})
    await target.prepare()  # a hook it does not define: the declared default
    answer = await target.generate(TargetInput(index=0, external_id="a", input="hi"))
    assert answer.output == "> hi hi"
