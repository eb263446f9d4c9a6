"""The JSON API under /api/v1/: thin handlers over selectors and services.

No ``from __future__ import annotations`` here, unlike elsewhere: django-ninja
resolves handler annotations through the handler's ``__globals__``, and
``@paginate`` wraps handlers in a function of ninja's own module, where names
such as ``RunFilter`` would not resolve.
"""

import functools
import logging
from collections.abc import Callable
from pathlib import PurePath
from typing import Annotated, Any, Literal

from django.contrib.auth.decorators import login_not_required
from django.contrib.auth.models import AbstractBaseUser
from django.contrib.auth.views import redirect_to_login
from django.db.models import QuerySet
from django.http import (
    HttpRequest,
    HttpResponse,
    JsonResponse,
    StreamingHttpResponse,
)
from django.urls import URLPattern, URLResolver
from ninja import (
    Field,
    File,
    Form,
    NinjaAPI,
    Query,
    Router,
    Schema,
    Status,
    UploadedFile,
)
from ninja.pagination import PageNumberPagination, paginate
from ninja.security import HttpBearer, django_auth

from runs import hot_reads, importers, pagecache
from runs.analysis import export
from runs.analysis.clusters import (
    ITEMS_PER_CLUSTER,
    MAX_ITEMS_PER_CLUSTER,
    RunClusters,
    run_clusters_cached,
)
from runs.analysis.compare import Comparison
from runs.analysis.figures import run_figures
from runs.analysis.summary import RunSummary
from runs.catalogue import scorer_kinds, target_kinds
from runs.downloads import (
    COMPARISON_COLUMNS,
    comparison_csv_response,
    export_response,
)
from runs.errors import DomainError, Forbidden, InvalidInput, TooManyRequests
from runs.models import (
    ApiKey,
    Dataset,
    Item,
    Membership,
    Project,
    ProjectSecret,
    Result,
    Run,
    Target,
)
from runs.schemas import (
    ApiKeyCreatedOut,
    ApiKeyIn,
    ApiKeyOut,
    ComparisonOut,
    DatasetFilter,
    DatasetIn,
    DatasetOut,
    DatasetPreviewForm,
    DatasetPreviewOut,
    DatasetUploadForm,
    DbId,
    ErrorOut,
    ItemOut,
    MemberIn,
    MemberOut,
    MemberPatch,
    PendingRows,
    PluginKindOut,
    ProjectIn,
    ProjectOut,
    ResultFilterIn,
    ResultRowOut,
    RetryIn,
    RetryOut,
    RunClustersOut,
    RunDetailOut,
    RunFilter,
    RunIn,
    RunOut,
    RunSummaryOut,
    ScorerKindOut,
    SecretIn,
    SecretOut,
    TargetFilter,
    TargetIn,
    TargetOut,
    TargetPatch,
    TargetTryIn,
    TargetTryOut,
    ValidationErrorOut,
)
from runs.secrets import secret_delete, secret_list, secret_set
from runs.selectors import (
    ResultFilters,
    api_key_list,
    comparison_pair,
    dataset_get,
    dataset_items,
    dataset_list,
    membership_list,
    project_get,
    project_get_with_role,
    project_list,
    result_filter,
    run_comparison,
    run_get,
    run_ids_parse,
    run_items_left,
    run_list,
    target_get,
    target_list,
)
from runs.services import (
    api_key_authenticate,
    api_key_create,
    api_key_revoke,
    membership_add,
    membership_remove,
    membership_update,
    project_create,
    run_cancel,
    run_create,
    run_retry,
    target_create,
    target_delete,
    target_try,
    target_update,
)
from runs.targets.trial import TargetTry

PAGE_SIZE = 50
MAX_PAGE_SIZE = 500
# Far beyond any real list, and small enough that an offset never overflows.
MAX_PAGE = 1_000_000
# Pages for people keep the site-wide login redirect; API calls answer 401. The
# schema and its docs page check access themselves (``docs_access``).
LOGIN_REDIRECTED_URL_NAMES = frozenset({"api-root"})
# Every status an operation can answer, for the schema: reads ...
READ_ERRORS: dict[int, Any] = {
    401: ErrorOut,
    404: ErrorOut,
    422: ValidationErrorOut,
}
# ... and writes (400: bad input or an unreadable body; 403: a viewer, or a
# session without its CSRF token; 413: a body over the size limit).
ERRORS: dict[int, Any] = {
    **READ_ERRORS,
    400: ErrorOut,
    403: ErrorOut,
    409: ErrorOut,
    413: ErrorOut,
}

# Reads whose query parameters are checked beyond their types answer 400 too.
ERRORS_READ_FILTERED: dict[int, Any] = {**READ_ERRORS, 400: ErrorOut}

logger = logging.getLogger(__name__)


class BoundedPageNumberPagination(PageNumberPagination):
    class Input(Schema):
        page: int = Field(1, ge=1, le=MAX_PAGE)
        page_size: Annotated[int, Field(ge=1, le=MAX_PAGE_SIZE)] | None = None


paginated = paginate(
    BoundedPageNumberPagination, page_size=PAGE_SIZE, max_page_size=MAX_PAGE_SIZE
)


class ApiKeyAuth(HttpBearer):
    """``Authorization: Bearer evk_...``; no CSRF check, as no cookie is involved."""

    def authenticate(self, request: HttpRequest, token: str) -> AbstractBaseUser | None:
        key = api_key_authenticate(token)
        if key is None:
            return None
        request.user = key.user
        request.api_key = key  # type: ignore[attr-defined]
        return key.user


def docs_access(view: Callable[..., HttpResponse]) -> Callable[..., HttpResponse]:
    """The schema and the docs page, for a session or an API key.

    Anonymous: 401 JSON for the schema (an API resource) and for clients that
    ask for JSON; the docs page sends a browser to the login page instead.
    """

    @functools.wraps(view)
    def wrapper(request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        if not request.user.is_authenticated:
            scheme, _, token = request.headers.get("Authorization", "").partition(" ")
            key = (
                api_key_authenticate(token.strip())
                if scheme.lower() == "bearer"
                else None
            )
            if key is not None:
                request.user = key.user
            elif (
                request.resolver_match.url_name == "openapi-view"
                and "json" not in request.headers.get("Accept", "")
            ):
                return redirect_to_login(request.get_full_path())
            else:
                return JsonResponse({"detail": "Unauthorized"}, status=401)
        return view(request, *args, **kwargs)

    return wrapper


class EvalsiteAPI(NinjaAPI):
    @property
    def urls(self) -> tuple[list[URLPattern | URLResolver], str, str]:
        patterns, app_name, namespace = super().urls
        for pattern in patterns:
            if (
                isinstance(pattern, URLPattern)
                and pattern.name not in LOGIN_REDIRECTED_URL_NAMES
            ):
                login_not_required(pattern.callback)
        return patterns, app_name, namespace


api = EvalsiteAPI(
    title="evalsite API",
    version="1",
    description=(
        "Datasets, targets and runs of the projects you belong to. Authenticate "
        "with your session (and its CSRF token) or `Authorization: Bearer <key>`; "
        "create a key on the API keys page (/account/keys/) or with "
        "`python manage.py create_api_key USERNAME`."
    ),
    auth=[ApiKeyAuth(), django_auth],
    docs_decorator=docs_access,
)


dataset_router = Router(tags=["datasets"])
target_router = Router(tags=["targets"])
run_router = Router(tags=["runs"])
scorer_router = Router(tags=["scorers"])


@api.exception_handler(DomainError)
def domain_error(request: HttpRequest, exc: DomainError) -> HttpResponse:
    if isinstance(exc, InvalidInput):
        body = exc.as_dict()
    else:
        body = {"detail": str(exc), "field": None, "line": None}
    response = api.create_response(request, body, status=exc.status_code)
    if isinstance(exc, TooManyRequests):
        response["Retry-After"] = str(exc.retry_after)
    return response


@api.exception_handler(Exception)
def server_error(request: HttpRequest, exc: Exception) -> HttpResponse:
    """Any other error: logged with its traceback, answered as JSON."""
    logger.exception("%s %s failed", request.method, request.path, exc_info=exc)
    return api.create_response(request, {"detail": "Internal server error"}, status=500)


# -- datasets -----------------------------------------------------------------


@dataset_router.post("", response={201: DatasetOut, **ERRORS})
def create_dataset(request: HttpRequest, payload: DatasetIn) -> Status[Dataset]:
    """Create a dataset (a new version when the name exists) from JSON items."""
    data = payload.model_dump(exclude={"project"})
    project = project_get(user=request.auth, project_id=payload.project)
    dataset = importers.dataset_create_from_items(
        project=project, user=request.auth, **data
    )
    return Status(201, dataset)


@dataset_router.post("/upload", response={201: DatasetOut, **ERRORS})
def upload_dataset(
    request: HttpRequest, form: Form[DatasetUploadForm], file: File[UploadedFile]
) -> Status[Dataset]:
    """Import a JSONL, CSV, JSON or YAML file as a dataset."""
    data = form.model_dump(exclude={"project", "name"})
    project = project_get(user=request.auth, project_id=form.project)
    source = importers.Source.from_upload(file)
    dataset = importers.dataset_import(
        project=project,
        user=request.auth,
        name=form.name or PurePath(source.name).stem,
        source=source,
        **data,
    )
    return Status(201, dataset)


@dataset_router.post("/preview", response={200: DatasetPreviewOut, **ERRORS})
def preview_dataset(
    request: HttpRequest, form: Form[DatasetPreviewForm], file: File[UploadedFile]
) -> importers.Preview:
    """The fields a file's records have and its first rows, to map before upload.

    Nothing is stored. `guess` names the likeliest id, input and expected fields.
    """
    project = project_get(user=request.auth, project_id=form.project)
    return importers.dataset_preview(
        project=project,
        user=request.auth,
        source=importers.Source.from_upload(file),
        format=form.format,
    )


@dataset_router.get("", response={200: list[DatasetOut], **READ_ERRORS})
@paginated
def list_datasets(
    request: HttpRequest, filters: Query[DatasetFilter]
) -> QuerySet[Dataset]:
    return filters.filter(dataset_list(user=request.auth))


@dataset_router.get("/{dataset_id}", response={200: DatasetOut, **READ_ERRORS})
def get_dataset(request: HttpRequest, dataset_id: DbId) -> Dataset:
    return dataset_get(user=request.auth, dataset_id=dataset_id)


@dataset_router.get("/{dataset_id}/items", response={200: list[ItemOut], **READ_ERRORS})
@paginated
def list_dataset_items(request: HttpRequest, dataset_id: DbId) -> QuerySet[Item]:
    """The dataset's items in dataset order."""
    dataset = dataset_get(user=request.auth, dataset_id=dataset_id)
    return dataset_items(dataset=dataset)


# -- targets ------------------------------------------------------------------


@target_router.post("", response={201: TargetOut, **ERRORS})
def create_target(request: HttpRequest, payload: TargetIn) -> Status[Target]:
    """Store a target; secrets are refused, name environment variables instead."""
    project = project_get(user=request.auth, project_id=payload.project)
    target = target_create(
        project=project,
        user=request.auth,
        name=payload.name,
        kind=payload.kind,
        config=payload.config,
    )
    return Status(201, target)


@target_router.get("", response={200: list[TargetOut], **READ_ERRORS})
@paginated
def list_targets(
    request: HttpRequest, filters: Query[TargetFilter]
) -> QuerySet[Target]:
    return filters.filter(target_list(user=request.auth))


@target_router.get("/kinds", response={200: list[PluginKindOut], **READ_ERRORS})
def list_target_kinds(request: HttpRequest) -> list[dict[str, Any]]:
    """Every target kind: its parameters as JSON Schema, an example, its secrets."""
    return target_kinds()


@target_router.get("/{target_id}", response={200: TargetOut, **READ_ERRORS})
def get_target(request: HttpRequest, target_id: DbId) -> Target:
    return target_get(user=request.auth, target_id=target_id)


# -- runs ---------------------------------------------------------------------


@run_router.post("", response={201: RunDetailOut, **ERRORS})
def create_run(request: HttpRequest, payload: RunIn) -> Status[Run]:
    """Create a run of a dataset against a stored or ad-hoc target, and launch it."""
    dataset = dataset_get(user=request.auth, dataset_id=payload.dataset)
    target = None
    if payload.target is not None:
        target = target_get(user=request.auth, target_id=payload.target)
    run = run_create(
        user=request.auth,
        dataset=dataset,
        target=target,
        target_kind=payload.target_kind,
        target_config=payload.target_config,
        scorers=payload.scorer_specs(),
        options=payload.options,
        name=payload.name,
    )
    return Status(201, run)


# What ``@paginated`` would make of list[RunOut]; the run list pages itself so
# that it can answer from a cache.
PagedRunOut = type(
    "PagedRunOut",
    (BoundedPageNumberPagination.Output,),
    {"__annotations__": {"items": list[RunOut]}},
)


@run_router.get("", response={200: PagedRunOut, **READ_ERRORS})
def list_runs(
    request: HttpRequest,
    filters: Query[RunFilter],
    ninja_pagination: Query[BoundedPageNumberPagination.Input],
) -> HttpResponse:
    """Runs, newest first."""
    page_size = min(ninja_pagination.page_size or PAGE_SIZE, MAX_PAGE_SIZE)
    offset = (ninja_pagination.page - 1) * page_size

    def read_rows() -> tuple[int, list[tuple[Any, ...]]]:
        # Every column of the page's runs: the answer shows nothing else.
        return hot_reads.run_records(
            user_id=request.auth.pk,
            filters=filters.model_dump(),
            offset=offset,
            limit=page_size,
        )

    def build() -> dict[str, Any]:
        # RunOut shows the project and dataset by id: no join, no rows to build.
        runs = filters.filter(run_list(user=request.auth)).select_related(None)
        return {"items": list(runs[offset : offset + page_size]), "count": count}

    count, _rows = key_data = read_rows()
    return pagecache.json_cached(
        request,
        name="runs",
        key_data=key_data,
        schema=PagedRunOut,
        build=build,
        renderer=api,
        still_current=read_rows,
    )


@run_router.get("/{run_id}", response={200: RunDetailOut, **READ_ERRORS})
def get_run(request: HttpRequest, run_id: DbId) -> Run:
    return run_get(user=request.auth, run_id=run_id)


@run_router.post("/{run_id}/cancel", response={200: RunDetailOut, **ERRORS})
def cancel_run(request: HttpRequest, run_id: DbId) -> Run:
    """Ask a run to stop; repeating it, or cancelling an ended run, is harmless."""
    run = run_get(user=request.auth, run_id=run_id)
    return run_cancel(run=run, user=request.auth)


@run_router.get(
    "/{run_id}/results", response={200: list[ResultRowOut], **ERRORS_READ_FILTERED}
)
@paginated
def list_results(
    request: HttpRequest, run_id: DbId, filters: Query[ResultFilterIn]
) -> "QuerySet[Result] | PendingRows":
    """A run's results in dataset order, filtered (the filters combine).

    With status pending or skipped: the items that have no result, one row each.
    """
    run = run_get(user=request.auth, run_id=run_id)
    chosen = ResultFilters.parse(filters.model_dump(), run=run)
    if chosen.lists_items:
        return PendingRows(run_items_left(run=run, filters=chosen), chosen.status)
    return result_filter(run=run, filters=chosen)


# -- scorers ------------------------------------------------------------------


@scorer_router.get("", response={200: list[ScorerKindOut], **READ_ERRORS})
def list_scorers(request: HttpRequest) -> list[dict[str, Any]]:
    """Every scorer kind: parameters as JSON Schema, an example, whether it
    needs an expected answer."""
    return scorer_kinds()


# -- project secrets ------------------------------------------------------------

secret_router = Router(tags=["secrets"])


@secret_router.get(
    "/{project_id}/secrets", response={200: list[SecretOut], **READ_ERRORS}
)
def list_secrets(request: HttpRequest, project_id: DbId) -> QuerySet[ProjectSecret]:
    """The project's secrets: names, hosts and times, never values (any member)."""
    project = project_get(user=request.auth, project_id=project_id)
    return secret_list(project=project, user=request.auth)


@secret_router.put(
    "/{project_id}/secrets/{name}",
    response={200: SecretOut, 201: SecretOut, **ERRORS},
)
def set_secret(
    request: HttpRequest, project_id: DbId, name: str, payload: SecretIn
) -> Status[ProjectSecret]:
    """Create (201) or change (200) a secret; project admins only.

    The value is stored encrypted and never returned; targets name the secret
    in their configuration (``api_key_secret``), and it is sent only to the
    hosts it is bound to. A new secret needs both; a change may give either.
    """
    project = project_get(user=request.auth, project_id=project_id)
    secret, created = secret_set(
        project=project,
        user=request.auth,
        name=name,
        value=payload.value,
        hosts=payload.hosts,
    )
    return Status(201 if created else 200, secret)


@secret_router.delete("/{project_id}/secrets/{name}", response={204: None, **ERRORS})
def delete_secret(request: HttpRequest, project_id: DbId, name: str) -> Status[None]:
    """Delete a secret; project admins only. Runs that use it will fail to start."""
    project = project_get(user=request.auth, project_id=project_id)
    secret_delete(project=project, user=request.auth, name=name)
    return Status(204, None)


api.add_router("/datasets", dataset_router)
api.add_router("/targets", target_router)
api.add_router("/runs", run_router)


# -- projects and members -----------------------------------------------------

project_router = Router(tags=["projects"])
key_router = Router(tags=["keys"])


@project_router.get("", response={200: list[ProjectOut], **READ_ERRORS})
@paginated
def list_projects(request: HttpRequest) -> QuerySet[Project]:
    """Your projects, each with your role in it."""
    return project_list(user=request.auth)


@project_router.post("", response={201: ProjectOut, **ERRORS})
def create_project(request: HttpRequest, payload: ProjectIn) -> Status[Project]:
    """Create a project; you become its admin."""
    project = project_create(
        name=payload.name, description=payload.description, owner=request.auth
    )
    return Status(201, project_get_with_role(user=request.auth, project_id=project.pk))


@project_router.get("/{project_id}", response={200: ProjectOut, **READ_ERRORS})
def get_project(request: HttpRequest, project_id: DbId) -> Project:
    return project_get_with_role(user=request.auth, project_id=project_id)


@project_router.get(
    "/{project_id}/members", response={200: list[MemberOut], **READ_ERRORS}
)
@paginated
def list_members(request: HttpRequest, project_id: DbId) -> QuerySet[Membership]:
    """The project's members, admins first."""
    project = project_get(user=request.auth, project_id=project_id)
    return membership_list(project=project)


@project_router.post(
    "/{project_id}/members",
    response={201: MemberOut, **ERRORS},
)
def add_member(
    request: HttpRequest, project_id: DbId, payload: MemberIn
) -> Status[Membership]:
    """Add an existing user by username or email (project admins only)."""
    project = project_get(user=request.auth, project_id=project_id)
    membership = membership_add(
        project=project, actor=request.auth, user=payload.user, role=payload.role
    )
    return Status(201, membership)


@project_router.patch(
    "/{project_id}/members/{user_id}",
    response={200: MemberOut, **ERRORS},
)
def update_member(
    request: HttpRequest, project_id: DbId, user_id: DbId, payload: MemberPatch
) -> Membership:
    """Change a member's role (admins only); the last admin stays admin (400)."""
    project = project_get(user=request.auth, project_id=project_id)
    return membership_update(
        project=project, actor=request.auth, user_id=user_id, role=payload.role
    )


@project_router.delete(
    "/{project_id}/members/{user_id}",
    response={204: None, **ERRORS},
)
def remove_member(
    request: HttpRequest, project_id: DbId, user_id: DbId
) -> Status[None]:
    """Remove a member (admins), or leave with your own id; never the last admin."""
    project = project_get(user=request.auth, project_id=project_id)
    membership_remove(project=project, actor=request.auth, user_id=user_id)
    return Status(204, None)


# -- API keys -------------------------------------------------------------------


@key_router.get("", response={200: list[ApiKeyOut], **READ_ERRORS})
@paginated
def list_keys(request: HttpRequest) -> QuerySet[ApiKey]:
    """Your API keys, revoked ones included; never the keys themselves."""
    return api_key_list(user=request.auth)


@key_router.post("", response={201: ApiKeyCreatedOut, **ERRORS})
def create_key(
    request: HttpRequest, response: HttpResponse, payload: ApiKeyIn
) -> Status[ApiKey]:
    """Create a key; it is in this response only. Needs a session: a key cannot
    make keys, so that revoking a leaked key is enough."""
    if getattr(request, "api_key", None) is not None:
        raise Forbidden("an API key cannot create keys; sign in to create one")
    key, plain = api_key_create(user=request.auth, name=payload.name)
    key.key = plain  # type: ignore[attr-defined]  (for this response only)
    response["Cache-Control"] = "no-store"
    return Status(201, key)


@key_router.delete("/{key_id}", response={204: None, **ERRORS})
def revoke_key(request: HttpRequest, key_id: DbId) -> Status[None]:
    """Revoke one of your keys; it stops working at once."""
    api_key_revoke(user=request.auth, key_id=key_id)
    return Status(204, None)


# -- one target: edit, delete, try ------------------------------------------------


@target_router.patch("/{target_id}", response={200: TargetOut, **ERRORS})
def update_target(
    request: HttpRequest, target_id: DbId, payload: TargetPatch
) -> Target:
    """Rename a target or replace its configuration; runs keep their copy."""
    target = target_get(user=request.auth, target_id=target_id)
    return target_update(
        target=target, user=request.auth, name=payload.name, config=payload.config
    )


@target_router.delete("/{target_id}", response={204: None, **ERRORS})
def delete_target(request: HttpRequest, target_id: DbId) -> Status[None]:
    """Delete a target; its runs keep the name, kind and configuration they used."""
    target = target_get(user=request.auth, target_id=target_id)
    target_delete(target=target, user=request.auth)
    return Status(204, None)


@target_router.post(
    "/{target_id}/try", response={200: TargetTryOut, 429: ErrorOut, **ERRORS}
)
async def try_target(
    request: HttpRequest, target_id: DbId, payload: TargetTryIn
) -> TargetTry:
    """Send one input to the target; the answer or the error, never a secret.

    Each user has a few tries at a time and a few a minute; one more is
    answered 429 with `Retry-After`.
    """
    return await target_try(target_id=target_id, user=request.auth, text=payload.input)


api.add_router("/projects", project_router)
api.add_router("/keys", key_router)
api.add_router("/scorers", scorer_router)
api.add_router("/projects", secret_router)


# -- comparison -----------------------------------------------------------------

compare_router = Router(tags=["compare"])


@compare_router.get("", response={200: ComparisonOut, 400: ErrorOut, **READ_ERRORS})
def compare_runs(request: HttpRequest, baseline: DbId, candidates: str) -> Comparison:
    """Each candidate run against the baseline, scorer by scorer: the paired
    table, a tested difference (Holm-adjusted) and a verdict.

    ``candidates`` is a comma-separated list of run ids.
    """
    candidate_ids = run_ids_parse(candidates, field="candidates")
    return run_comparison(
        user=request.auth, baseline_id=baseline, candidate_ids=candidate_ids
    )


@compare_router.get(
    "/items",
    response={400: ErrorOut, **READ_ERRORS},
    openapi_extra={
        "responses": {
            "200": {
                "description": "The paired items of (candidate, scorer) as CSV: "
                + ", ".join(COMPARISON_COLUMNS),
                "content": {"text/csv": {"schema": {"type": "string"}}},
            }
        }
    },
)
def compare_items(
    request: HttpRequest,
    baseline: DbId,
    candidate: DbId,
    scorer: Annotated[str, Field(max_length=100)],
    change: Literal["regressions", "improvements", "both_failed", "output_changed"]
    | None = None,
) -> StreamingHttpResponse:
    """Every paired item of one candidate and scorer against the baseline, as
    CSV (the comparison page's items table, whole); ``change`` filters it."""
    first, second = comparison_pair(
        user=request.auth, baseline_id=baseline, candidate_id=candidate, scorer=scorer
    )
    return comparison_csv_response(
        baseline=first, candidate=second, scorer=scorer, change=change
    )


api.add_router("/compare", compare_router)
# -- failure clusters -------------------------------------------------------------

cluster_router = Router(tags=["runs"])


@cluster_router.get(
    "/{run_id}/clusters", response={200: RunClustersOut, **READ_ERRORS, 400: ErrorOut}
)
def get_run_clusters(
    request: HttpRequest,
    run_id: DbId,
    baseline: DbId | None = None,
    items: Annotated[int, Field(ge=0, le=MAX_ITEMS_PER_CLUSTER)] = ITEMS_PER_CLUSTER,
) -> RunClusters:
    """The run's errors grouped by signature and failing scores by scorer and
    reason, biggest first; against ``baseline``, how each cluster moved."""
    run = run_get(user=request.auth, run_id=run_id)
    other = run_get(user=request.auth, run_id=baseline) if baseline else None
    return run_clusters_cached(run=run, baseline=other, items_per_cluster=items)


api.add_router("/runs", cluster_router)
# -- export of a run's results ----------------------------------------------------

EXPORT_RESPONSES: dict[str, Any] = {
    "200": {
        "description": "Every result in dataset order, streamed as a download: "
        "its item, epoch, output, status, error, latency, tokens, cost, attempts "
        "and, per scorer, `<scorer>.value`, `<scorer>.passed`, `<scorer>.error`.",
        "content": {
            export.EXPORT_FORMATS[name].content_type.partition(";")[0]: {
                "schema": {"type": "string"}
            }
            for name in export.EXPORT_FORMATS
        },
    }
}


@run_router.get(
    "/{run_id}/export",
    response=READ_ERRORS,
    openapi_extra={"responses": EXPORT_RESPONSES},
)
def export_run(
    request: HttpRequest, run_id: DbId, format: Literal["jsonl", "csv"] = "jsonl"
) -> StreamingHttpResponse:
    """A run's results as JSON Lines or CSV (cells safe to open in a spreadsheet)."""
    run = run_get(user=request.auth, run_id=run_id)
    return export_response(run=run, format=format)


# -- run summary ----------------------------------------------------------------


@run_router.get("/{run_id}/summary", response={200: RunSummaryOut, **READ_ERRORS})
def get_run_summary(request: HttpRequest, run_id: DbId) -> RunSummary:
    """How good the run was: per scorer, results, scores, errors, the pass rate
    with its Wilson 95% interval and, with several epochs, pass@k and pass^k;
    latency percentiles, tokens, cost, counts per status and error kind."""
    run = run_get(user=request.auth, run_id=run_id)
    return run_figures(run=run)[0]


# -- retry inside a run ---------------------------------------------------------


@run_router.post("/{run_id}/retry", response={200: RetryOut, **ERRORS})
def retry_run(request: HttpRequest, run_id: DbId, payload: RetryIn) -> dict[str, Any]:
    """Run the chosen results of an ended run again, in the same run.

    Each chosen result is rewritten in place, its new attempts appended to its
    attempt log; items with no result run too. 409 while the run executes.
    """
    run = run_get(user=request.auth, run_id=run_id)
    plan = run_retry(
        run=run,
        user=request.auth,
        statuses=payload.statuses,
        cluster=payload.cluster,
        dry_run=payload.dry_run,
    )
    return {
        "items": plan.items,
        "results": plan.results,
        "rewrites": plan.rewrites,
        "missing": plan.missing,
        "calls": plan.calls,
        "statuses": list(plan.statuses),
        "cluster": plan.cluster,
        "launched": plan.launched,
        "run": plan.run,
    }


# -- re-scoring a run ---------------------------------------------------------------

from runs.rescoring import run_rescore, scoring_passes  # noqa: E402
from runs.schemas import RescoreIn, RescoreOut, ScoringPassOut  # noqa: E402


@run_router.post("/{run_id}/rescore", response={200: RescoreOut, **ERRORS})
def rescore_run(
    request: HttpRequest, run_id: DbId, payload: RescoreIn
) -> dict[str, Any]:
    """Score an ended run's stored outputs again, without calling its target.

    Scores are added or replaced by scorer name (the other scorers' stay) and
    the run's scorer list is updated; the pass runs in the background and is
    listed at ``/runs/{id}/scoring-passes``. 409 while the run executes or
    is being re-scored.
    """
    run = run_get(user=request.auth, run_id=run_id)
    plan = run_rescore(
        run=run,
        user=request.auth,
        scorers=payload.scorer_specs(),
        dry_run=payload.dry_run,
    )
    return {
        "results": plan.results,
        "added": plan.added,
        "replaced": plan.replaced,
        "kind_changes": {k: list(v) for k, v in plan.kind_changes.items()},
        "launched": plan.launched,
        "scoring_pass": plan.scoring_pass,
        "run": plan.run,
    }


@run_router.get(
    "/{run_id}/scoring-passes", response={200: list[ScoringPassOut], **READ_ERRORS}
)
def list_scoring_passes(request: HttpRequest, run_id: DbId) -> list[Any]:
    """The run's scoring passes, oldest first: its own execution, then each
    re-score with who started it, when, its scorers and parameters, and counts."""
    run = run_get(user=request.auth, run_id=run_id)
    return scoring_passes(run=run)


# -- tokens and cost ---------------------------------------------------------------

from runs.resuming import run_resume  # noqa: E402
from runs.schemas import ResumeIn, ResumeOut  # noqa: E402


@run_router.post("/{run_id}/resume", response={200: ResumeOut, **ERRORS})
def resume_run(request: HttpRequest, run_id: DbId, payload: ResumeIn) -> dict[str, Any]:
    """Run the items of the run that have no result, in the same run.

    For a run stopped by its cost budget: give a higher ``cost_budget`` in
    ``options`` (the only option that may change). 409 while the run executes
    or when every item has a result.
    """
    run = run_get(user=request.auth, run_id=run_id)
    resumed = run_resume(run=run, user=request.auth, options=payload.options)
    return {"run": resumed, "launched": True}
