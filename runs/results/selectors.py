"""Reads of runs and their results, for pages and the API."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlencode

from django.contrib.auth.models import User
from django.db.models import (
    Count,
    Exists,
    OuterRef,
    QuerySet,
    Subquery,
)
from django.db.models.functions import Coalesce

from runs.access import Action, allows, visible_project_ids
from runs.analysis.cluster_keys import parse_cluster_key
from runs.analysis.cluster_members import cluster_filter
from runs.analysis.figures import run_figures
from runs.analysis.progress import RunProgress, run_progress
from runs.analysis.summary import (
    PASS_RATE_DEFINITION,
    RunSummary,
    ScorerSummary,
    run_scorer_summaries_cached,
)
from runs.errors import DomainError, InvalidInput, NotFound
from runs.executor.store import run_index_stop
from runs.models import (
    ErrorKind,
    Item,
    Membership,
    Result,
    Run,
    Score,
)
from runs.plugins.scorers import SCORERS
from runs.plugins.steps import Step
from runs.plugins.targets import TargetError, TargetInput, get_target_class
from runs.records.trajectories import stored_steps
from runs.records.visible_run import run_visible, run_visible_with_related


def run_list(*, user: User, project_id: int | None = None) -> QuerySet[Run]:
    runs = Run.objects.filter(project_id__in=visible_project_ids(user)).select_related(
        "project", "dataset"
    )
    if project_id is not None:
        runs = runs.filter(project_id=project_id)
    return runs


def run_get(*, user: User, run_id: int) -> Run:
    """The run with its project, dataset and creator, if the user may see it
    (``run_list``'s scope; one compiled statement, records/visible_run.py)."""
    run = (
        run_visible_with_related(user_id=user.pk, run_id=int(run_id))
        if user.is_authenticated
        else None
    )
    if run is None:
        raise NotFound(f"no run {run_id}")
    return run


def run_for_figures(*, user: User, run_id: int) -> Run:
    """``run_get`` without the run's related rows: what its figures read."""
    run = run_visible(user_id=user.pk, run_id=run_id) if user.is_authenticated else None
    if run is None:
        raise NotFound(f"no run {run_id}")
    return run


def result_list(*, run: Run, status: str | None = None) -> QuerySet[Result]:
    """A run's results in dataset order, optionally of one status."""
    results = (
        Result.objects.filter(run=run)
        .select_related("item")
        .prefetch_related("scores")
        .order_by("item_index", "epoch")
    )
    if status:
        results = results.filter(status=status)
    return results


def result_get(*, user: User, run_id: int, result_id: int) -> Result:
    run = run_get(user=user, run_id=run_id)
    try:
        result = result_list(run=run).get(pk=result_id)
    except Result.DoesNotExist:
        raise NotFound(f"no result {result_id} in run {run_id}") from None
    result.run = run  # read already, with its project, dataset and creator
    return result


@dataclass(frozen=True, slots=True)
class RunOverview:
    run: Run
    progress: RunProgress
    scorers: list[ScorerSummary]
    can_edit: bool


def run_overview(*, user: User, run_id: int) -> RunOverview:
    """A run with its progress, scorer means and whether the user may change it.

    The user's role comes with the run, in the query that checks they may see it.
    """
    if not user.is_authenticated:
        raise NotFound(f"no run {run_id}")
    role = Membership.objects.filter(project=OuterRef("project"), user=user)
    try:
        run = (
            run_list(user=user)
            .select_related("created_by")
            .annotate(user_role=Subquery(role.values("role")[:1]))
            .get(pk=run_id)
        )
    except Run.DoesNotExist:
        raise NotFound(f"no run {run_id}") from None
    return RunOverview(
        run=run,
        progress=run_progress(run=run),
        # Only a run still going shows them in its progress block; once it
        # has ended, its summary does (run_report).
        scorers=[] if run.is_final else run_scorer_summaries_cached(run=run),
        can_edit=allows(run.user_role, Action.EDIT),
    )


def result_latest(*, run: Run, limit: int, after_id: int = 0) -> list[Result]:
    """The latest stored results, newest first, only those after ``after_id``."""
    return list(
        Result.objects.filter(run=run, pk__gt=after_id)
        .select_related("item")
        .prefetch_related("scores")
        .order_by("-pk")[:limit]
    )


@dataclass(frozen=True, slots=True)
class RunReport:
    summary: RunSummary
    charts: dict[str, Any]
    definition: str = PASS_RATE_DEFINITION


def run_report(*, run: Run) -> RunReport:
    """The run page's summary section: its figures and its charts' data."""
    summary, charts = run_figures(run=run)
    return RunReport(summary=summary, charts=charts)


PENDING = "pending"
SKIPPED = "skipped"
VERDICTS = ("passed", "failed", "errored", "skipped")
CLUSTER_KEY_MAX = 200


def _choice(value: str | None, choices: Iterable[str], field: str) -> str | None:
    if not value:
        return None
    known = list(choices)
    if value not in known:
        raise InvalidInput(
            f"must be one of {', '.join(known)}, not {value!r}", field=field
        )
    return value


@dataclass(frozen=True, slots=True)
class ResultFilters:
    """What a run's results table or the API lists; every field optional.

    ``status`` is a result status, or ``pending`` / ``skipped``: the items that
    have no (counted) result yet in a run still going / in an ended run.
    ``verdict`` is the chosen ``scorer``'s: passed, failed (scored and not
    passed), errored (the scorer raised or timed out) or skipped (its
    condition did not hold).
    """

    status: str | None = None
    error_kind: str | None = None
    scorer: str | None = None
    verdict: str | None = None
    external_id: str | None = None
    cluster: str | None = None

    @classmethod
    def parse(cls, params: Mapping[str, Any], *, run: Run) -> ResultFilters:
        """Filters from a query string; InvalidInput naming a bad parameter."""

        def text(name: str) -> str | None:
            value = params.get(name)
            if isinstance(value, str) and "\x00" in value:
                # PostgreSQL holds no NUL in text: refused here, not a 500 there.
                raise InvalidInput("contains a NUL character (\\u0000)", field=name)
            return value.strip() or None if isinstance(value, str) else None

        statuses = [*Result.Status.values, PENDING, SKIPPED]
        scorers = run.scorer_names
        filters = cls(
            status=_choice(text("status"), statuses, "status"),
            error_kind=_choice(text("error_kind"), ErrorKind.values, "error_kind"),
            scorer=_choice(text("scorer"), scorers, "scorer"),
            verdict=_choice(text("verdict"), VERDICTS, "verdict"),
            external_id=text("external_id"),
            cluster=text("cluster"),
        )
        if filters.verdict and not filters.scorer:
            raise InvalidInput(
                "choose the scorer whose verdict to filter by", field="scorer"
            )
        if filters.cluster and len(filters.cluster) > CLUSTER_KEY_MAX:
            raise InvalidInput(
                f"must be at most {CLUSTER_KEY_MAX} characters", field="cluster"
            )
        if filters.cluster:
            parse_cluster_key(filters.cluster)  # InvalidInput naming "cluster"
        if filters.external_id and len(filters.external_id) > 200:
            raise InvalidInput("must be at most 200 characters", field="external_id")
        return filters

    @property
    def lists_items(self) -> bool:
        """Pending and skipped are items without a result, not results."""
        return self.status in (PENDING, SKIPPED)

    @property
    def active(self) -> bool:
        return any(getattr(self, name) for name in self.__slots__)

    def query(self) -> list[tuple[str, str]]:
        """The filters as query-string pairs (for links that keep them)."""
        return [
            (name, getattr(self, name))
            for name in self.__slots__
            if getattr(self, name)
        ]

    @property
    def query_string(self) -> str:
        """``?status=failed&...`` for a link that keeps them; "" without any."""
        pairs = self.query()
        return f"?{urlencode(pairs)}" if pairs else ""


def run_items_lacking(*, run: Run) -> QuerySet[Item]:
    """The run's items with an epoch that has no counted result, in dataset order."""
    counted = Result.objects.filter(run=run, item=OuterRef("pk"), retry_pending=False)
    items = Item.objects.filter(dataset_id=run.dataset_id)
    if (index_stop := run_index_stop(run)) is not None:
        items = items.filter(index__lt=index_stop)  # a run of its first items
    epochs = run.epochs
    if epochs == 1:
        items = items.filter(~Exists(counted))
    else:
        count = counted.values("item").annotate(n=Count("pk")).values("n")
        items = items.annotate(results_in_run=Coalesce(Subquery(count[:1]), 0)).filter(
            results_in_run__lt=epochs
        )
    return items.order_by("index")


def result_filter(*, run: Run, filters: ResultFilters) -> QuerySet[Result]:
    """A run's results matching every filter, in dataset order.

    Not for ``pending`` / ``skipped`` (``run_items_left``).
    """
    results = result_list(run=run)
    if filters.status:
        results = results.filter(status=filters.status)
    if filters.error_kind:
        # Said to have one, as the partial index on the run's error kinds
        # holds: SQLite then reads only the results with that kind.
        results = results.filter(error_kind=filters.error_kind).exclude(error_kind="")
    if filters.external_id:
        # The item first, by its dataset's unique (dataset, external_id), then
        # its results: a join would read every result of the run to find it.
        items = Item.objects.filter(
            dataset_id=run.dataset_id, external_id=filters.external_id
        )
        # One item's results share its index: ordered by epoch alone, the
        # planner has no reason to walk the run in dataset order instead.
        results = results.filter(item__in=items.values("pk")).order_by("epoch")
    if filters.cluster:
        results = results.filter(cluster_filter(filters.cluster, run=run))
    if filters.scorer:
        scores = Score.objects.filter(result=OuterRef("pk"), scorer=filters.scorer)
        if filters.verdict == "passed":
            scores = scores.filter(passed=True)
        elif filters.verdict == "failed":
            scores = scores.filter(passed=False, error="")
        elif filters.verdict == "errored":
            scores = scores.exclude(error="")
        elif filters.verdict == "skipped":
            scores = scores.filter(skipped=True)
        results = results.filter(Exists(scores))
    return results


def run_items_left(*, run: Run, filters: ResultFilters) -> QuerySet[Item]:
    """The items a ``pending`` or ``skipped`` filter lists.

    Pending are the items still without a result while the run is going,
    skipped the same once it has ended; filters that only results have (an
    error kind, a verdict, a cluster) match none of them.
    """
    wanted = PENDING if not run.is_final else SKIPPED
    result_only = filters.error_kind or filters.scorer or filters.cluster
    if filters.status != wanted or result_only:
        return Item.objects.none()
    items = run_items_lacking(run=run)
    if filters.external_id:
        items = items.filter(external_id=filters.external_id)
    return items


# -- a result's page ------------------------------------------------------------------


def _target_input(item: Item) -> TargetInput:
    return TargetInput(
        index=item.index,
        external_id=item.external_id,
        input=item.input,
        expected=item.expected,
        metadata=item.metadata or {},
    )


def result_request(*, run: Run, item: Item) -> dict[str, Any] | None:
    """The request body the run's target sent for ``item``, derived from its
    frozen configuration as the target builds it; None when the kind has no
    such body or the configuration no longer reads."""
    try:
        plugin = get_target_class(run.target_kind)
        return plugin.request_for(plugin.parse(run.target_config), _target_input(item))
    except (DomainError, TargetError):
        return None


def result_prompts(*, result: Result) -> dict[str, list[dict[str, str]]]:
    """Per scorer that asks a model (a judge): the messages it was sent."""
    if result.output is None:
        return {}
    prompts = {}
    item = _target_input(result.item)
    steps: list[Step] | None = None
    for spec in result.run.scorers:
        plugin = SCORERS.get(spec.get("kind", ""))
        if plugin is None:
            continue
        try:
            params = plugin.parse(spec.get("params", {}))
        except DomainError:
            continue
        if steps is None and plugin.prompt_reads_steps(params):
            steps = stored_steps([result.pk]).get(result.pk, [])
        messages = plugin.prompt_for(params, result.output, item, steps or [])
        if messages is not None:
            prompts[spec.get("name") or spec["kind"]] = messages
    return prompts


def finish_reason(result: Result) -> str | None:
    """Why the model stopped, as its answering attempt recorded it."""
    for attempt in reversed(result.attempts):
        if attempt.get("outcome") == "ok":
            reason = attempt.get("finish_reason")
            return reason if isinstance(reason, str) else None
    return None
