"""Browser protections: CSP without inline code, private caching, HTTPS switches."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from django.contrib.auth.models import User
from django.test import Client

from runs.models import Dataset
from runs.projects.services import api_key_create
from runs.results.services import run_create
from tests.processes import ROOT, env_for

pytestmark = pytest.mark.django_db


def test_pages_carry_a_strict_content_security_policy(alice_client: Client) -> None:
    policy = alice_client.get("/")["Content-Security-Policy"]

    directives = dict(part.strip().split(" ", 1) for part in policy.split(";"))
    assert directives["script-src"] == "'self'"
    assert directives["style-src"] == "'self'"
    assert "unsafe" not in policy


def test_run_page_has_no_inline_handler_or_style(
    alice_client: Client, alice: User, dataset: Dataset
) -> None:
    run = run_create(
        user=alice,
        dataset=dataset,
        target_kind="python",
        target_config={"callable": "runs.targets.examples.echo"},
        scorers=["exact_match"],
        launch=False,
    )

    html = alice_client.get(f"/runs/{run.pk}/").content.decode()

    assert " onchange=" not in html
    assert " style=" not in html
    assert "data-submit-on-change" in html


def test_htmx_is_told_not_to_eval_or_inject_styles(alice_client: Client) -> None:
    html = alice_client.get("/").content.decode()

    assert '"allowEval": false' in html
    assert '"includeIndicatorStyles": false' in html


def test_signed_in_page_is_not_stored_by_caches(alice_client: Client) -> None:
    assert alice_client.get("/")["Cache-Control"] == "private, no-store"


def test_api_answer_to_a_key_is_not_stored_by_caches(alice: User) -> None:
    _, plain = api_key_create(user=alice, name="ci")

    response = Client().get("/api/v1/runs", HTTP_AUTHORIZATION=f"Bearer {plain}")

    assert response["Cache-Control"] == "private, no-store"


def test_static_files_keep_their_caching(alice_client: Client) -> None:
    response = alice_client.get("/static/js/evalsite.js")

    assert response.status_code == 200
    assert "no-store" not in response.get("Cache-Control", "")


DEPLOYMENT = {
    "EVALSITE_HTTPS": "1",
    "EVALSITE_HSTS_SECONDS": "31536000",
    "EVALSITE_HSTS_INCLUDE_SUBDOMAINS": "1",
    "EVALSITE_HSTS_PRELOAD": "1",
    "EVALSITE_PROXY_SSL_HEADER": "X-Forwarded-Proto",
    "EVALSITE_ALLOWED_HOSTS": "evals.example.org",
    "EVALSITE_SECRET_KEY": "k" * 20 + "0123456789abcdefghijklmnopqrstuvwxyz",
}


def test_check_deploy_is_clean_with_the_deployment_variables(tmp_path: Path) -> None:
    result = subprocess.run(
        [sys.executable, "manage.py", "check", "--deploy", "--fail-level", "WARNING"],
        cwd=ROOT,
        env=env_for(tmp_path) | DEPLOYMENT,
        capture_output=True,
        text=True,
    )

    assert result.returncode == 0, result.stderr + result.stdout


def test_proxy_header_marks_requests_secure(settings: object) -> None:
    settings.SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")
    settings.SECURE_SSL_REDIRECT = True

    behind_proxy = Client().get("/login/", HTTP_X_FORWARDED_PROTO="https")
    plain = Client().get("/login/")

    assert behind_proxy.status_code == 200
    assert plain.status_code == 301
    assert plain["Location"].startswith("https://")
