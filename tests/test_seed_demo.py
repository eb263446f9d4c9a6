"""seed_demo: an ordinary demo user whose password is made once and kept."""

from __future__ import annotations

import re
import subprocess
from io import StringIO
from pathlib import Path

import pytest
from django.contrib.auth.models import User
from django.core.management import call_command
from django.test import Client
from django.urls import reverse

from runs.demo.seed import DEMO_PROJECT, DEMO_TARGETS, PUBLISHED_PASSWORD
from runs.management.commands.seed_demo import served_url
from runs.models import Dataset, Membership, Project, Target

# Seeding runs the demo agent, whose execution reads what the seed committed.
pytestmark = pytest.mark.django_db(transaction=True)

ROOT = Path(__file__).resolve().parent.parent
LOGIN_LINE = re.compile(r"log in at (\S+) as demo / (\S+)")


def seed(*args: str) -> str:
    out = StringIO()
    call_command("seed_demo", *args, stdout=out, stderr=StringIO())
    return out.getvalue()


def printed_password(output: str) -> str:
    match = LOGIN_LINE.search(output)
    assert match, output
    return match.group(2)


def log_in(password: str) -> Client:
    client = Client()
    response = client.post(reverse("login"), {"username": "demo", "password": password})
    assert response.status_code == 302, "the printed password does not log in"
    return client


def test_the_demo_user_is_an_ordinary_member_of_the_demo_project() -> None:
    seed()

    user = User.objects.get(username="demo")
    assert not user.is_staff
    assert not user.is_superuser
    project = Project.objects.get(name=DEMO_PROJECT)
    assert Membership.objects.filter(project=project, user=user).exists()


def test_the_password_is_made_on_first_start_and_printed_with_the_url() -> None:
    output = seed("--host", "192.0.2.10", "--port", "9123")

    match = LOGIN_LINE.search(output)
    assert match, output
    url, password = match.groups()
    assert url == "http://192.0.2.10:9123/"
    assert password != PUBLISHED_PASSWORD
    assert len(password) >= 12
    log_in(password)


def test_the_published_password_does_not_log_in() -> None:
    seed()

    response = Client().post(
        reverse("login"), {"username": "demo", "password": PUBLISHED_PASSWORD}
    )

    assert response.status_code == 200  # the form again, with an error
    assert "_auth_user_id" not in response.client.session


def test_each_install_gets_its_own_password() -> None:
    first = printed_password(seed())
    User.objects.filter(username="demo").delete()

    second = printed_password(seed())

    assert first != second


def test_the_password_is_printed_only_once() -> None:
    password = printed_password(seed())

    again = seed()

    assert password not in again
    assert "log in at http://127.0.0.1:8000/ as demo" in again


def test_seeding_again_keeps_the_password_and_every_session() -> None:
    password = printed_password(seed())
    client = log_in(password)
    assert client.get(reverse("runs:run_list")).status_code == 200

    seed()

    assert client.get(reverse("runs:run_list")).status_code == 200  # still in
    log_in(password)


def test_an_old_install_loses_the_published_password_and_admin_rights() -> None:
    old = User.objects.create_superuser("demo", "", PUBLISHED_PASSWORD)
    project = Project.objects.create(name=DEMO_PROJECT)
    Membership.objects.create(project=project, user=old, role=Membership.Role.ADMIN)

    output = seed()

    user = User.objects.get(username="demo")
    assert not user.is_staff
    assert not user.is_superuser
    assert not user.check_password(PUBLISHED_PASSWORD)
    assert "now an ordinary user with a new password" in output
    log_in(printed_password(output))
    assert Project.objects.filter(name=DEMO_PROJECT).count() == 1


def test_a_demo_user_with_admin_rights_but_its_own_password_is_demoted() -> None:
    User.objects.create_user("demo", password="chosen-by-the-operator", is_staff=True)

    output = seed()

    user = User.objects.get(username="demo")
    assert not user.is_staff
    assert not user.check_password("chosen-by-the-operator")
    log_in(printed_password(output))


def test_a_safe_demo_user_keeps_the_password_its_operator_set() -> None:
    User.objects.create_user("demo", password="chosen-by-the-operator")

    output = seed()

    assert LOGIN_LINE.search(output) is None
    log_in("chosen-by-the-operator")


def test_seeding_twice_creates_nothing_twice() -> None:
    seed()
    counts = (Project.objects.count(), Dataset.objects.count(), Target.objects.count())

    seed()

    assert (
        Project.objects.count(),
        Dataset.objects.count(),
        Target.objects.count(),
    ) == counts
    assert Target.objects.count() == len(DEMO_TARGETS)


def test_quiet_still_prints_a_new_password() -> None:
    output = seed("--quiet")

    assert "demo project" not in output
    log_in(printed_password(output))


def test_someone_elses_demo_project_is_left_alone(alice: User) -> None:
    project = Project.objects.create(name=DEMO_PROJECT)
    Membership.objects.create(project=project, user=alice, role=Membership.Role.ADMIN)
    err = StringIO()

    call_command("seed_demo", stdout=StringIO(), stderr=err)

    assert "demo data left out" in err.getvalue()
    assert not Membership.objects.filter(project=project, user__username="demo")
    assert not Dataset.objects.filter(project=project).exists()


@pytest.mark.parametrize(
    ("host", "port", "url"),
    [
        ("127.0.0.1", 8000, "http://127.0.0.1:8000/"),
        ("0.0.0.0", 8080, "http://127.0.0.1:8080/"),
        ("::", 8000, "http://[::1]:8000/"),
        ("::1", 9000, "http://[::1]:9000/"),
        ("example.org", 80, "http://example.org:80/"),
    ],
)
def test_the_printed_url_is_one_a_browser_can_open(
    host: str, port: int, url: str
) -> None:
    assert served_url(host, port) == url


def test_make_run_passes_its_host_and_port_and_prints_no_fixed_password() -> None:
    dry = subprocess.run(
        ["make", "-n", "run", "HOST=192.0.2.10", "PORT=9123"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    ).stdout

    seed_line = next(line for line in dry.splitlines() if "seed_demo" in line)
    assert "--host 192.0.2.10" in seed_line
    assert "--port 9123" in seed_line
    assert PUBLISHED_PASSWORD not in dry
