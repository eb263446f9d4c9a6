"""The target endpoints: create, list, kinds, read, update, delete, try."""

from __future__ import annotations

from typing import Any

from django.db.models import QuerySet
from ninja import Query, Router, Status

from runs.catalogue.kinds import target_kinds
from runs.catalogue.schemas import PluginKindOut
from runs.models import Target
from runs.projects.selectors import project_get
from runs.targets.schemas import (
    TargetFilter,
    TargetIn,
    TargetOut,
    TargetPatch,
    TargetTryIn,
)
from runs.targets.selectors import target_get, target_list
from runs.targets.services import (
    target_create,
    target_delete,
    target_try,
    target_update,
)
from runs.targets.trial import TargetTry
from runs.web.api import ERRORS, READ_ERRORS, paginated
from runs.web.requests import ApiRequest
from runs.web.schemas import DbId, ErrorOut

target_router = Router(tags=["targets"])


@target_router.post("", response={201: TargetOut, **ERRORS})
def create_target(request: ApiRequest, payload: TargetIn) -> Status[Target]:
    """Store a target; secrets are refused, name environment variables instead."""
    project = project_get(user=request.auth, project_id=payload.project)
    data = payload.model_dump(exclude={"project"})
    target = target_create(project=project, user=request.auth, **data)
    return Status(201, target)


@target_router.get("", response={200: list[TargetOut], **READ_ERRORS})
@paginated
def list_targets(request: ApiRequest, filters: Query[TargetFilter]) -> QuerySet[Target]:
    return filters.filter(target_list(user=request.auth))


@target_router.get("/kinds", response={200: list[PluginKindOut], **READ_ERRORS})
def list_target_kinds(request: ApiRequest) -> list[dict[str, Any]]:
    """Every target kind: its parameters as JSON Schema, an example, its secrets."""
    return target_kinds()


@target_router.get("/{target_id}", response={200: TargetOut, **READ_ERRORS})
def get_target(request: ApiRequest, target_id: DbId) -> Target:
    return target_get(user=request.auth, target_id=target_id)


@target_router.patch("/{target_id}", response={200: TargetOut, **ERRORS})
def update_target(request: ApiRequest, target_id: DbId, payload: TargetPatch) -> Target:
    """Rename a target or replace its configuration; runs keep their copy."""
    target = target_get(user=request.auth, target_id=target_id)
    return target_update(
        target=target, user=request.auth, name=payload.name, config=payload.config
    )


@target_router.delete("/{target_id}", response={204: None, **ERRORS})
def delete_target(request: ApiRequest, target_id: DbId) -> Status[None]:
    """Delete a target; its runs keep the name, kind and configuration they used."""
    target = target_get(user=request.auth, target_id=target_id)
    target_delete(target=target, user=request.auth)
    return Status(204, None)


@target_router.post(
    "/{target_id}/try", response={200: TargetTry, 429: ErrorOut, **ERRORS}
)
async def try_target(
    request: ApiRequest, target_id: DbId, payload: TargetTryIn
) -> TargetTry:
    """Send one input to the target; the answer or the error, never a secret.

    Each user has a few tries at a time and a few a minute; one more is
    answered 429 with `Retry-After`.
    """
    return await target_try(target_id=target_id, user=request.auth, text=payload.input)
