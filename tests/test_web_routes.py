"""Pages' URL entries (runs/web/routes.py) and the shared reads of visible rows."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import AnonymousUser, User
from django.http import Http404, HttpRequest, HttpResponse
from django.test import RequestFactory

from runs.errors import Forbidden, NotFound
from runs.models import Dataset, Project
from runs.web.routes import page, pages
from runs.web.selectors import row_get, visible_rows


def missing_thing(request: HttpRequest) -> HttpResponse:
    raise NotFound("no such thing")


def refused_thing(request: HttpRequest) -> HttpResponse:
    raise Forbidden("viewers may not")


def test_page_names_its_url_after_the_view() -> None:
    assert page("things/", missing_thing).name == "missing_thing"
    assert page("things/", missing_thing, name="things").name == "things"


def test_page_shows_not_found_as_404() -> None:
    callback = page("things/", missing_thing).callback
    with pytest.raises(Http404, match="no such thing"):
        callback(RequestFactory().get("/things/"))


def test_page_shows_forbidden_as_403() -> None:
    callback = page("things/", refused_thing).callback
    request = RequestFactory().get("/things/")
    request.user = AnonymousUser()

    response = callback(request)

    assert response.status_code == 403
    assert "viewers may not" in response.content.decode()


def test_visible_rows_leave_out_other_projects(
    dataset: Dataset, mallory: User, alice: User, other_project: Project
) -> None:
    assert list(visible_rows(Dataset, user=mallory)) == []
    assert list(visible_rows(Dataset, user=alice)) == [dataset]
    assert list(visible_rows(Dataset, user=alice, project_id=other_project.pk)) == []


def test_row_get_answers_an_unseen_row_as_missing(
    dataset: Dataset, mallory: User
) -> None:
    with pytest.raises(NotFound, match=f"no dataset {dataset.pk}"):
        row_get(visible_rows(Dataset, user=mallory), pk=dataset.pk, noun="dataset")


def test_pages_join_each_route_to_the_prefix_and_name_it_after_its_view() -> None:
    patterns = pages(
        "things/<id:thing_id>/", {"": missing_thing, "refuse/": refused_thing}
    )

    assert [(str(p.pattern), p.name) for p in patterns] == [
        ("things/<id:thing_id>/", "missing_thing"),
        ("things/<id:thing_id>/refuse/", "refused_thing"),
    ]
