"""The projects pages: list and create, a project with its members, and the
member forms (add, change role, remove, leave)."""

from __future__ import annotations

import re

import pytest
from django.contrib.auth.models import User
from django.test import Client
from django.urls import reverse

from runs.models import Membership, Project

pytestmark = pytest.mark.django_db


def _detail(project: Project) -> str:
    return reverse("runs:project_detail", args=[project.pk])


def _role_url(project: Project, user: User) -> str:
    return reverse("runs:project_member_update", args=[project.pk, user.pk])


def _remove_url(project: Project, user: User) -> str:
    return reverse("runs:project_member_remove", args=[project.pk, user.pk])


def _add_url(project: Project) -> str:
    return reverse("runs:project_member_add", args=[project.pk])


def _role(project: Project, user: User) -> str | None:
    return (
        Membership.objects.filter(project=project, user=user)
        .values_list("role", flat=True)
        .first()
    )


# -- list and create ---------------------------------------------------------------


def test_projects_page_lists_the_users_projects_with_their_role(
    victor_client: Client, project: Project, other_project: Project
) -> None:
    response = victor_client.get(reverse("runs:project_list"))

    assert response.status_code == 200
    projects = response.context["projects"]
    rows = [(p["name"], p["role"], p["member_count"]) for p in projects]
    assert rows == [("Research", "viewer", 3)]
    assert "Elsewhere" not in response.content.decode()


def test_the_projects_page_read_again_is_the_cached_one_until_a_row_moves(
    victor_client: Client, alice_client: Client, project: Project, mallory: User
) -> None:
    """The projects page was read and rendered for every request: now once per
    state of its rows (every column it shows) and user."""
    url = reverse("runs:project_list")
    first = victor_client.get(url)
    again = victor_client.get(url)
    Membership.objects.create(project=project, user=mallory, role="viewer")
    joined = victor_client.get(url)
    Project.objects.filter(pk=project.pk).update(description="Sums, nightly")
    described = victor_client.get(url)
    alice = alice_client.get(url)

    assert first.context is not None
    assert again.context is None  # no template rendered
    token = re.compile(r"[A-Za-z0-9]{64}")  # each response's own CSRF token
    assert token.sub("", again.content.decode()) == token.sub(
        "", first.content.decode()
    )
    assert '<td class="num">4</td>' in joined.content.decode()
    assert "Sums, nightly" in described.content.decode()
    assert alice.context is not None
    assert ">admin<" in alice.content.decode()


def test_nav_links_to_projects_and_api_keys(alice_client: Client) -> None:
    page = alice_client.get(reverse("runs:run_list")).content.decode()

    assert f'href="{reverse("runs:project_list")}"' in page
    assert f'href="{reverse("runs:account_keys")}"' in page


def test_a_projects_description_is_stored_with_unix_line_breaks(
    mallory_client: Client,
) -> None:
    mallory_client.post(
        reverse("runs:project_list"),
        {"name": "Lab", "description": "Math evals.\r\nOwner: mallory"},
    )

    assert Project.objects.get(name="Lab").description == "Math evals.\nOwner: mallory"


def test_creating_a_project_makes_the_creator_its_admin(
    mallory_client: Client, mallory: User
) -> None:
    response = mallory_client.post(
        reverse("runs:project_list"), {"name": " Lab ", "description": "evals"}
    )

    project = Project.objects.get(name="Lab")
    assert response.status_code == 302
    assert response["Location"] == _detail(project)
    assert list(project.memberships.values_list("user__username", "role")) == [
        ("mallory", "admin")
    ]


def test_creating_a_project_with_a_taken_name_names_the_field(
    alice_client: Client, project: Project
) -> None:
    response = alice_client.post(reverse("runs:project_list"), {"name": "Research"})

    assert response.status_code == 200
    assert "exists" in response.context["form"].errors["name"][0]
    assert Project.objects.filter(name="Research").count() == 1


def test_creating_a_project_needs_a_name(alice_client: Client) -> None:
    response = alice_client.post(reverse("runs:project_list"), {"name": "  "})

    assert response.status_code == 200
    assert response.context["form"].errors["name"]
    assert not Project.objects.exists()


# -- the project page --------------------------------------------------------------


def test_project_page_shows_members_with_roles_admins_first(
    victor_client: Client, project: Project
) -> None:
    response = victor_client.get(_detail(project))

    assert response.status_code == 200
    members = [(m.user.username, m.role) for m in response.context["overview"].members]
    assert members == [("alice", "admin"), ("bob", "editor"), ("victor", "viewer")]


def test_project_page_links_to_its_secrets(
    alice_client: Client, project: Project
) -> None:
    page = alice_client.get(_detail(project)).content.decode()

    assert f'href="/projects/{project.pk}/secrets/"' in page


def test_project_page_offers_management_forms_to_admins_only(
    alice_client: Client, bob_client: Client, project: Project
) -> None:
    admin_page = alice_client.get(_detail(project)).content.decode()
    editor_page = bob_client.get(_detail(project)).content.decode()

    assert (
        'id="invite-form"' in admin_page
        and _role_url(project, project.memberships.get(role="editor").user)
        in admin_page
    )
    assert 'id="invite-form"' not in editor_page
    assert 'name="role"' not in editor_page


def test_project_page_is_not_found_for_an_outsider(
    mallory_client: Client, project: Project
) -> None:
    assert mallory_client.get(_detail(project)).status_code == 404


# -- add a member ------------------------------------------------------------------


@pytest.mark.parametrize("identifier", ["mallory", "MALLORY@example.org"])
def test_admin_adds_an_existing_user_by_username_or_email(
    alice_client: Client, project: Project, mallory: User, identifier: str
) -> None:
    response = alice_client.post(
        _add_url(project), {"user": identifier, "role": "viewer"}
    )

    assert response.status_code == 302
    assert _role(project, mallory) == "viewer"


def test_adding_an_unknown_user_names_the_field(
    alice_client: Client, project: Project
) -> None:
    response = alice_client.post(
        _add_url(project), {"user": "nobody", "role": "editor"}
    )

    assert response.status_code == 200
    assert "no user 'nobody'" in response.context["invite"].errors["user"][0]
    assert project.memberships.count() == 3


def test_adding_an_existing_member_is_refused(
    alice_client: Client, project: Project, bob: User
) -> None:
    response = alice_client.post(_add_url(project), {"user": "bob", "role": "viewer"})

    assert "already a member" in response.context["invite"].errors["user"][0]
    assert _role(project, bob) == "editor"


def test_an_editor_cannot_add_members(
    bob_client: Client, project: Project, mallory: User
) -> None:
    response = bob_client.post(_add_url(project), {"user": "mallory", "role": "admin"})

    assert response.status_code == 403
    assert _role(project, mallory) is None


def test_an_invalid_add_form_from_a_viewer_is_still_forbidden(
    victor_client: Client, project: Project
) -> None:
    response = victor_client.post(_add_url(project), {"user": "", "role": "boss"})

    assert response.status_code == 403


def test_an_outsider_cannot_add_herself(
    mallory_client: Client, project: Project, mallory: User
) -> None:
    response = mallory_client.post(
        _add_url(project), {"user": "mallory", "role": "admin"}
    )

    assert response.status_code == 404
    assert _role(project, mallory) is None


# -- change a role -----------------------------------------------------------------


def test_admin_changes_a_members_role(
    alice_client: Client, project: Project, victor: User
) -> None:
    response = alice_client.post(_role_url(project, victor), {"role": "editor"})

    assert response.status_code == 302
    assert _role(project, victor) == "editor"


def test_the_last_admin_cannot_be_demoted(
    alice_client: Client, project: Project, alice: User
) -> None:
    response = alice_client.post(
        _role_url(project, alice), {"role": "viewer"}, follow=True
    )

    assert _role(project, alice) == "admin"
    assert "last admin" in response.content.decode()


def test_an_admin_may_step_down_when_another_admin_remains(
    alice_client: Client, project: Project, alice: User, bob: User
) -> None:
    alice_client.post(_role_url(project, bob), {"role": "admin"})

    alice_client.post(_role_url(project, alice), {"role": "editor"})

    assert (_role(project, alice), _role(project, bob)) == ("editor", "admin")


def test_an_unknown_role_is_refused(
    alice_client: Client, project: Project, victor: User
) -> None:
    response = alice_client.post(
        _role_url(project, victor), {"role": "owner"}, follow=True
    )

    assert _role(project, victor) == "viewer"
    assert "must be one of" in response.content.decode()


def test_a_viewer_cannot_change_roles(
    victor_client: Client, project: Project, victor: User
) -> None:
    response = victor_client.post(_role_url(project, victor), {"role": "admin"})

    assert response.status_code == 403
    assert _role(project, victor) == "viewer"


def test_an_outsider_cannot_change_roles(
    mallory_client: Client, project: Project, bob: User
) -> None:
    response = mallory_client.post(_role_url(project, bob), {"role": "viewer"})

    assert response.status_code == 404
    assert _role(project, bob) == "editor"


def test_changing_the_role_of_a_non_member_is_not_found(
    alice_client: Client, project: Project, mallory: User
) -> None:
    response = alice_client.post(_role_url(project, mallory), {"role": "viewer"})

    assert response.status_code == 404
    assert _role(project, mallory) is None


# -- remove and leave --------------------------------------------------------------


def test_admin_removes_a_member(
    alice_client: Client, project: Project, bob: User
) -> None:
    response = alice_client.post(_remove_url(project, bob))

    assert response.status_code == 302
    assert _role(project, bob) is None


def test_the_last_admin_cannot_be_removed_or_leave(
    alice_client: Client, project: Project, alice: User
) -> None:
    response = alice_client.post(_remove_url(project, alice), follow=True)

    assert _role(project, alice) == "admin"
    assert "last admin" in response.content.decode()


def test_an_editor_cannot_remove_another_member(
    bob_client: Client, project: Project, victor: User
) -> None:
    response = bob_client.post(_remove_url(project, victor))

    assert response.status_code == 403
    assert _role(project, victor) == "viewer"


def test_a_member_may_leave(
    victor_client: Client, project: Project, victor: User
) -> None:
    response = victor_client.post(_remove_url(project, victor))

    assert response.status_code == 302
    assert response["Location"] == reverse("runs:project_list")
    assert _role(project, victor) is None
    assert victor_client.get(_detail(project)).status_code == 404


def test_an_outsider_cannot_remove_members(
    mallory_client: Client, project: Project, bob: User
) -> None:
    response = mallory_client.post(_remove_url(project, bob))

    assert response.status_code == 404
    assert _role(project, bob) == "editor"


def test_member_forms_refuse_get(
    alice_client: Client, project: Project, bob: User
) -> None:
    assert alice_client.get(_remove_url(project, bob)).status_code == 405
    assert _role(project, bob) == "editor"


@pytest.mark.parametrize("action", ["project_member_update", "project_member_remove"])
def test_a_member_id_beyond_the_database_range_is_not_found(
    alice_client: Client, project: Project, action: str
) -> None:
    url = reverse(f"runs:{action}", args=[project.pk, 2**63])

    response = alice_client.post(url, {"role": "viewer"})

    assert response.status_code == 404
