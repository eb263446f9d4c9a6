"""Writes: every change to projects, targets, runs and keys goes through here."""

from __future__ import annotations

import hashlib
import secrets
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, replace
from typing import Any

from asgiref.sync import sync_to_async
from django.contrib.auth import get_user_model
from django.contrib.auth.models import AbstractBaseUser
from django.db import IntegrityError, transaction
from django.db.models import Q, QuerySet
from django.utils import timezone

from runs import events, hot_reads, try_throttle
from runs.access import require_role
from runs.analysis.clusters import cluster_filter
from runs.errors import ConfigError, Conflict, InvalidInput, NotFound
from runs.executor.launchers import get_launcher
from runs.executor.options import RunOptions
from runs.executor.store import retries_release, run_recount
from runs.importers import ItemRow, dataset_create_from_rows
from runs.key_usage import key_usage_note
from runs.models import (
    ApiKey,
    Dataset,
    Item,
    Membership,
    Project,
    Result,
    Run,
    RunStatus,
    ScoringPass,
    Target,
)
from runs.names import clean_name
from runs.pricing import PriceTable, price_table, use_prices
from runs.redaction import Redactor
from runs.scorers import REGISTRY as SCORERS
from runs.scorers import clean_scorer_specs
from runs.secrets import (
    TargetContext,
    check_plugin_secrets_bound,
    check_secrets_bound,
    target_context,
)
from runs.selectors import SKIPPED, run_items_lacking, target_get
from runs.targets import clean_target_config, trial
from runs.targets.base import get_target_class

API_KEY_PREFIX = "evk_"


def project_create(
    *, name: str, owner: AbstractBaseUser, description: str = ""
) -> Project:
    """Create a project with ``owner`` as its admin."""
    name = clean_name(name, model=Project)
    with transaction.atomic():
        project, created = Project.objects.get_or_create(
            name=name, defaults={"description": description}
        )
        if not created:
            raise Conflict(f"a project named {name!r} exists")
        Membership.objects.create(
            project=project, user=owner, role=Membership.Role.ADMIN
        )
    return project


def project_get_or_create(*, name: str, user: AbstractBaseUser) -> Project:
    """The user's project called ``name``, or a new one with the user as admin.

    Only the user's own projects are looked at: a project of that name that
    the user is not a member of is a conflict, never joined.
    """
    name = name.strip()
    project = Project.objects.filter(name=name, memberships__user=user).first()
    if project is not None:
        return project
    return project_create(name=name, owner=user)


def target_create(
    *,
    project: Project,
    user: AbstractBaseUser,
    name: str,
    kind: str,
    config: dict[str, Any],
) -> Target:
    """Validate a target configuration and store it (secrets only as env names)."""
    require_role(user, project, Membership.Role.EDITOR)
    name = clean_name(name, model=Target)
    cleaned = clean_target_config(kind, config, path="config")
    check_target_secrets(project=project, kind=kind, config=cleaned, path="config")
    try:
        with transaction.atomic():
            return Target.objects.create(
                project=project, name=name, kind=kind, config=cleaned, created_by=user
            )
    except IntegrityError:
        raise Conflict(f"a target named {name!r} exists in {project}") from None


def run_create(
    *,
    user: AbstractBaseUser | None,
    dataset: Dataset,
    target: Target | None = None,
    target_kind: str | None = None,
    target_config: dict[str, Any] | None = None,
    scorers: list[Any],
    options: dict[str, Any] | RunOptions | None = None,
    name: str = "",
    parent: Run | None = None,
    launch: bool = True,
) -> Run:
    """Create a run with a frozen copy of its configuration, and launch it."""
    project = dataset.project
    if user is not None:
        require_role(user, project, Membership.Role.EDITOR)
    name = clean_name(name, model=Run, required=False)
    if target is not None:
        if target.project_id != project.pk:
            raise InvalidInput(
                "belongs to another project than the dataset", field="target"
            )
        target_kind, target_config = target.kind, target.config
    if not target_kind:
        raise InvalidInput("is required", field="target")
    config = clean_target_config(
        target_kind, target_config or {}, path="target_config", kind_field="target"
    )
    check_target_secrets(
        project=project, kind=target_kind, config=config, path="target_config"
    )
    # A kind that builds on the project's data (chain: another run) checks it
    # here and freezes what it refers to; the run it builds on is its parent.
    prepare = getattr(get_target_class(target_kind), "prepare_for_run", None)
    if prepare is not None:
        config, source = prepare(
            config, project=project, dataset=dataset, path="target_config"
        )
        parent = parent or source
    scorer_specs = clean_scorer_specs(scorers, path="scorers")
    if not scorer_specs:
        raise InvalidInput("choose at least one scorer", field="scorers")
    _require_expected_answers(dataset, scorer_specs)
    check_scorer_secrets(project=project, specs=scorer_specs)
    if not isinstance(options, RunOptions):
        options = RunOptions.from_dict(options, path="options")
    run = Run.objects.create(
        project=project,
        name=name,
        dataset=dataset,
        dataset_hash=dataset.content_hash,
        target=target,
        target_name=target.name if target else target_kind,
        target_kind=target_kind,
        target_config=config,
        scorers=scorer_specs,
        options=options.to_dict(),
        total=dataset.item_count * options.epochs,
        parent=parent,
        created_by=user,
    )
    if launch:
        transaction.on_commit(lambda: run_launch(run=run))
    return run


def check_target_secrets(
    *, project: Project, kind: str, config: dict[str, Any], path: str
) -> None:
    """Refuse a (cleaned) target configuration that would send a project
    secret where the secret is not bound; the error names ``path.field``."""
    try:
        check_secrets_bound(project=project, kind=kind, config=config)
    except InvalidInput as exc:
        raise InvalidInput(exc.message, field=f"{path}.{exc.field}") from None


def check_scorer_secrets(*, project: Project, specs: list[dict[str, Any]]) -> None:
    """``check_target_secrets`` for cleaned scorer specs (``scorers[i].params``)."""
    for position, spec in enumerate(specs):
        try:
            check_plugin_secrets_bound(
                project=project, plugin=SCORERS[spec["kind"]], config=spec["params"]
            )
        except InvalidInput as exc:
            field = f"scorers[{position}].params.{exc.field}"
            raise InvalidInput(exc.message, field=field) from None


def _require_expected_answers(dataset: Dataset, specs: list[dict[str, Any]]) -> None:
    """Refuse scorers that compare with an expected answer the dataset lacks.

    Without this, every item would score 0 and the run would look completed.
    """
    needing = [
        spec["name"]
        for spec in specs
        if SCORERS[spec["kind"]].requires_expected(spec["params"])
    ]
    if not needing or dataset.item_count == 0 or dataset.expected_count > 0:
        return
    names = ", ".join(needing)
    raise InvalidInput(
        f"{names} compare{'s' if len(needing) == 1 else ''} outputs with the "
        f"expected answer, and dataset {dataset.name!r} v{dataset.version} has "
        "none; import it again naming its answer field, or choose a scorer "
        "that needs no expected answer",
        field="scorers",
    )


def run_launch(*, run: Run) -> None:
    get_launcher().launch(run.pk)


def run_cancel(*, run: Run, user: AbstractBaseUser | None = None) -> Run:
    """Ask a run to stop; harmless when repeated or when the run has ended.

    A pending run that no executor has claimed ends at once; a running one is
    stopped by its executor, in whatever process, within a second.
    """
    if user is not None:
        require_role(user, run.project, Membership.Role.EDITOR)
    if run.is_final:
        return run
    Run.objects.filter(pk=run.pk).update(cancel_requested=True)
    with transaction.atomic():
        unclaimed = Run.objects.filter(
            pk=run.pk, status=RunStatus.PENDING, heartbeat_at__isnull=True
        ).update(status=RunStatus.CANCELLED, finished_at=timezone.now())
        if unclaimed and retries_release(run.pk):
            # A retry no executor started: its results keep their outcome.
            released = Run.objects.select_for_update().get(pk=run.pk)
            run_recount(released)
            released.save()
    get_launcher().cancel(run.pk)
    run.refresh_from_db()
    if unclaimed:
        events.publish_run_update_sync(run.pk, final=True)
    return run


def api_key_create(*, user: AbstractBaseUser, name: str) -> tuple[ApiKey, str]:
    """Create an API key; the plain key is returned once and never stored."""
    name = clean_name(name, model=ApiKey, required=False)
    secret = secrets.token_urlsafe(32)
    prefix = secrets.token_hex(4)
    plain = f"{API_KEY_PREFIX}{prefix}_{secret}"
    key = ApiKey.objects.create(
        user=user,
        name=name or "default",
        prefix=prefix,
        key_hash=api_key_hash(plain),
    )
    return key, plain


def api_key_hash(plain: str) -> str:
    # Keys carry 256 bits of randomness, so one round of SHA-256 suffices.
    return hashlib.sha256(plain.encode()).hexdigest()


def api_key_authenticate(plain: str, *, note_use: bool = True) -> ApiKey | None:
    """The active key matching ``plain``, with its user, or None."""
    parts = plain.removeprefix(API_KEY_PREFIX).split("_", 1)
    if not plain.startswith(API_KEY_PREFIX) or len(parts) != 2:
        return None
    key = hot_reads.api_key_with_user(parts[0])
    if key is None or not secrets.compare_digest(key.key_hash, api_key_hash(plain)):
        return None
    if note_use:
        key_usage_note(key)
    return key


# -- memberships -----------------------------------------------------------------


def _role_checked(role: str) -> str:
    if role not in Membership.Role.values:
        known = ", ".join(Membership.Role.values)
        raise InvalidInput(f"must be one of {known}, not {role!r}", field="role")
    return role


def _project_locked(project: Project, actor: AbstractBaseUser, role: str) -> Project:
    """Lock the project's row and check the actor's role under the lock.

    Every change of a project's members takes this lock first, so two admins
    demoting each other at once cannot leave the project without one, and an
    admin demoted a moment ago can no longer act as one.
    """
    locked = Project.objects.select_for_update().filter(pk=project.pk).first()
    if locked is None:
        raise NotFound("no such project")
    require_role(actor, locked, role)
    return locked


def _member_of(project: Project, user_id: int) -> Membership:
    # Through the user's key, whose lookup treats an id beyond the column's
    # range as matching nothing (user_id= would overflow on SQLite).
    membership = (
        Membership.objects.select_related("user")
        .filter(project=project, user__pk=user_id)
        .first()
    )
    if membership is None:
        raise NotFound(f"user {user_id} is not a member of {project}")
    return membership


def _admins_besides(project: Project, membership: Membership) -> bool:
    return (
        Membership.objects.filter(project=project, role=Membership.Role.ADMIN)
        .exclude(pk=membership.pk)
        .exists()
    )


def _user_by_username_or_email(identifier: str) -> AbstractBaseUser:
    identifier = identifier.strip()
    if not identifier:
        raise InvalidInput("is required: a username or an email address", field="user")
    users = get_user_model().objects.filter(is_active=True)
    user = users.filter(username=identifier).first()
    if user is not None:
        return user
    matches = list(users.filter(email__iexact=identifier)[:2])
    if len(matches) == 1:
        return matches[0]
    if matches:
        raise InvalidInput(
            "several users have this email address; give the username", field="user"
        )
    raise InvalidInput(f"no user {identifier!r}: invite an existing user", field="user")


def membership_add(
    *,
    project: Project,
    actor: AbstractBaseUser,
    user: str,
    role: str = Membership.Role.EDITOR,
) -> Membership:
    """Add an existing user (by username or email) to a project; admins only."""
    with transaction.atomic():
        project = _project_locked(project, actor, Membership.Role.ADMIN)
        role = _role_checked(role)
        invitee = _user_by_username_or_email(user)
        membership, created = Membership.objects.get_or_create(
            project=project, user=invitee, defaults={"role": role}
        )
    if not created:
        raise Conflict(f"{invitee.get_username()} is already a member of {project}")
    return membership


def membership_update(
    *, project: Project, actor: AbstractBaseUser, user_id: int, role: str
) -> Membership:
    """Change a member's role; admins only, and never the last admin's."""
    with transaction.atomic():
        project = _project_locked(project, actor, Membership.Role.ADMIN)
        role = _role_checked(role)
        membership = _member_of(project, user_id)
        if (
            membership.role == Membership.Role.ADMIN
            and role != Membership.Role.ADMIN
            and not _admins_besides(project, membership)
        ):
            raise InvalidInput(
                f"{membership.user.get_username()} is the last admin of {project}; "
                "make another member admin first",
                field="role",
            )
        membership.role = role
        membership.save(update_fields=["role"])
    return membership


def membership_remove(
    *, project: Project, actor: AbstractBaseUser, user_id: int
) -> None:
    """Remove a member (admins), or leave a project (any member); never the last
    admin."""
    # Anyone may leave; only an admin removes someone else.
    needed = Membership.Role.VIEWER if actor.pk == user_id else Membership.Role.ADMIN
    with transaction.atomic():
        project = _project_locked(project, actor, needed)
        membership = _member_of(project, user_id)
        if membership.role == Membership.Role.ADMIN and not _admins_besides(
            project, membership
        ):
            raise InvalidInput(
                f"{membership.user.get_username()} is the last admin of {project}; "
                "make another member admin first",
                field="user",
            )
        membership.delete()


# -- API keys ----------------------------------------------------------------------


def api_key_revoke(*, user: AbstractBaseUser, key_id: int) -> ApiKey:
    """Revoke one of the user's own keys; it stops working at once."""
    with transaction.atomic():
        key = ApiKey.objects.select_for_update().filter(user=user, pk=key_id).first()
        if key is None:
            raise NotFound(f"no API key {key_id}")
        if key.revoked_at is None:
            key.revoked_at = timezone.now()
            key.save(update_fields=["revoked_at"])
    return key


# -- targets: edit, delete, try --------------------------------------------------

TARGET_TRY_TIMEOUT_SECONDS = 5.0
TARGET_TRY_MAX_CHARS = trial.MAX_CHARS
TARGET_TRY_DEFAULT_INPUT = "Say hello"


def target_update(
    *,
    target: Target,
    user: AbstractBaseUser,
    name: str | None = None,
    config: dict[str, Any] | None = None,
) -> Target:
    """Rename a target or replace its configuration, validated as on creation.

    Runs keep the frozen copy they were started with.
    """
    require_role(user, target.project, Membership.Role.EDITOR)
    changed: list[str] = []
    if name is not None:
        name = clean_name(name, model=Target)
        target.name = name
        changed.append("name")
    if config is not None:
        target.config = clean_target_config(target.kind, config, path="config")
        check_target_secrets(
            project=target.project,
            kind=target.kind,
            config=target.config,
            path="config",
        )
        changed.append("config")
    if not changed:
        return target
    try:
        with transaction.atomic():
            target.save(update_fields=changed)
    except IntegrityError:
        raise Conflict(f"a target named {name!r} exists in {target.project}") from None
    return target


def target_delete(*, target: Target, user: AbstractBaseUser) -> None:
    """Delete a target; its runs keep their frozen name, kind and configuration."""
    require_role(user, target.project, Membership.Role.EDITOR)
    with transaction.atomic():
        target.delete()


async def target_try(
    *,
    target_id: int,
    user: AbstractBaseUser,
    text: str = TARGET_TRY_DEFAULT_INPUT,
    seconds: float = TARGET_TRY_TIMEOUT_SECONDS,
) -> trial.TargetTry:
    """Send one input through the target's real code path, for at most ``seconds``.

    Runs on the event loop: a slow target holds no server thread while it is
    waited for. Each user has a few tries at a time and a few a minute
    (``try_throttle``); one more raises TooManyRequests. The answer or the
    error is returned with every secret the target was given replaced, so a
    server that echoes its headers cannot reveal one.
    """
    plan = await _try_prepare(target_id=target_id, user=user, text=text)
    if plan.context is None or plan.redactor is None:
        return trial.TargetTry(ok=False, error=plan.error, error_type="ConfigError")
    async with try_throttle.try_slot(user_id=user.pk, lease=seconds + 5):
        # A judge (a scorer target) prices its tokens from this table.
        with use_prices(plan.prices):
            outcome = await trial.send_one(
                plan.target.kind, plan.target.config, text, seconds, plan.context
            )
    return await trial.redacted(outcome, plan.redactor)


@dataclass(frozen=True, slots=True)
class _TryPlan:
    target: Target
    prices: PriceTable
    context: TargetContext | None  # None: its secrets cannot be had (``error``)
    redactor: Redactor | None
    error: str = ""


@sync_to_async
def _try_prepare(*, target_id: int, user: AbstractBaseUser, text: str) -> _TryPlan:
    """What a try reads from the database, read before it goes out."""
    target = target_get(user=user, target_id=target_id)
    require_role(user, target.project, Membership.Role.EDITOR)
    if not text.strip():
        raise InvalidInput("is required", field="input")
    if len(text) > TARGET_TRY_MAX_CHARS:
        raise InvalidInput(
            f"must be at most {TARGET_TRY_MAX_CHARS} characters", field="input"
        )
    prices = price_table()
    try:
        context = target_context(target.project_id, target.kind, target.config)
    except ConfigError as exc:
        return _TryPlan(target, prices, None, None, str(exc))
    # Built here, off the event loop (a run's redactor costs a fraction of a second).
    return _TryPlan(target, prices, context, Redactor.of(context))


# -- failure clusters ------------------------------------------------------------


def dataset_create_from_cluster(
    *, run: Run, user: AbstractBaseUser, key: str, name: str
) -> Dataset:
    """A new dataset (or a new version of ``name``) of a cluster's items.

    Each item of the run's dataset with a result in the cluster is copied once,
    in dataset order, with its id, input, expected answer and metadata.
    """
    require_role(user, run.project, Membership.Role.EDITOR)
    members = Result.objects.filter(run=run).filter(cluster_filter(key))
    items = Item.objects.filter(
        dataset_id=run.dataset_id, pk__in=members.values("item_id")
    ).order_by("index")
    fields = ("index", "external_id", "input", "expected", "metadata")

    def read_rows() -> Iterator[ItemRow]:
        for row in items.values_list(*fields).iterator(chunk_size=500):
            yield ItemRow(*row)

    return dataset_create_from_rows(
        project=run.project,
        user=user,
        name=name,
        read_rows=read_rows,
        source_format="cluster",
        source_name=f"run {run.pk}, cluster {key}",
        description=f"The items of cluster {key} of run #{run.pk} ({run}).",
    )


# -- retrying inside a run ---------------------------------------------------------

RETRY_STATUSES = (*Result.Status.values, SKIPPED)
DEFAULT_RETRY_STATUSES = (Result.Status.FAILED, Result.Status.TIMED_OUT)


@dataclass(frozen=True, slots=True)
class RetryPlan:
    """What a retry executes (or would, for a dry run).

    ``results`` counts executions of an (item, epoch): the stored results to
    rewrite (``rewrites``) plus those that have none (``missing``, the skipped
    ones); ``items`` the distinct items among them; ``calls`` the most calls
    to the target this can make, each execution making up to ``max_attempts``.
    """

    run: Run
    statuses: tuple[str, ...]
    cluster: str | None
    items: int
    rewrites: int
    missing: int
    max_attempts: int
    started: bool = False  # the results are marked and the run is pending
    launched: bool = False  # and handed to the launcher

    @property
    def results(self) -> int:
        return self.rewrites + self.missing

    @property
    def calls(self) -> int:
        return self.results * self.max_attempts


def _retry_statuses(
    statuses: Iterable[str] | None, cluster: str | None
) -> tuple[str, ...]:
    if statuses is None:
        # A cluster names its results itself (failed scores are succeeded calls).
        return tuple(Result.Status.values) if cluster else DEFAULT_RETRY_STATUSES
    chosen = tuple(dict.fromkeys(s.strip() for s in statuses if s and s.strip()))
    if not chosen:
        raise InvalidInput("choose at least one status to retry", field="statuses")
    for status in chosen:
        if status not in RETRY_STATUSES:
            known = ", ".join(RETRY_STATUSES)
            raise InvalidInput(
                f"must be among {known}, not {status!r}", field="statuses"
            )
    return chosen


def _retry_plan(
    run: Run, statuses: tuple[str, ...], cluster: str | None
) -> tuple[RetryPlan, QuerySet[Result]]:
    """The plan for an ended run, and the stored results it rewrites."""
    chosen = Result.objects.filter(
        run=run, retry_pending=False, status__in=[s for s in statuses if s != SKIPPED]
    )
    if cluster:
        chosen = chosen.filter(cluster_filter(cluster))
    stored = Result.objects.filter(run=run).count()
    missing = max(run.total - stored, 0)
    if missing and SKIPPED not in statuses:
        # The executor runs every item without a result: a run's leftovers are
        # part of whatever runs next in it.
        statuses = (*statuses, SKIPPED)
    lacking = run_items_lacking(run=run).values("pk") if missing else None
    items_q = Q(pk__in=chosen.values("item_id"))
    if lacking is not None:
        items_q |= Q(pk__in=lacking)
    items = Item.objects.filter(dataset_id=run.dataset_id).filter(items_q).count()
    plan = RetryPlan(
        run=run,
        statuses=statuses,
        cluster=cluster,
        items=items,
        rewrites=chosen.count(),
        missing=missing,
        max_attempts=RunOptions.from_dict(run.options).max_attempts,
    )
    return plan, chosen


def run_retry(
    *,
    run: Run,
    user: AbstractBaseUser | None,
    statuses: Iterable[str] | None,
    cluster: str | None = None,
    dry_run: bool = False,
    launch: bool = True,
) -> RetryPlan:
    """Run the chosen results of an ended run again, inside the same run.

    In one transaction the chosen results are marked ``retry_pending`` and
    taken out of the counts, and the run goes back to pending; the executor
    then rewrites each of those rows in place (its attempts appended to the
    log) and runs the items that have no result. Rows a retry did not reach
    keep their previous outcome when the run ends. Refused while the run is
    executing. ``statuses`` None: failed and timed out, or with a cluster
    every result of it. ``launch=False`` leaves the execution to the caller.
    """
    if user is not None:
        require_role(user, run.project, Membership.Role.EDITOR)
    cluster = (cluster or "").strip() or None
    statuses = _retry_statuses(statuses, cluster)
    with transaction.atomic():
        locked = Run.objects.select_for_update().get(pk=run.pk)
        if not locked.is_final:
            raise Conflict(
                f"run {run.pk} is still {locked.status}: retry once it has "
                "ended (or cancel it first)"
            )
        if any(
            not scoring.stale
            for scoring in ScoringPass.objects.filter(
                run=locked, status__in=[ScoringPass.Status.PENDING, "running"]
            )
        ):
            raise Conflict(
                f"run {run.pk} is being re-scored: retry once the pass has ended"
            )
        plan, chosen = _retry_plan(locked, statuses, cluster)
        if dry_run or not plan.results:
            return plan
        chosen.update(retry_pending=True)
        run_recount(locked)
        locked.status = RunStatus.PENDING
        locked.cancel_requested = False
        locked.error = ""
        locked.started_at = locked.finished_at = locked.heartbeat_at = None
        locked.executor_id = ""
        locked.throttle_limit = None
        locked.in_flight = 0
        locked.retries_used = 0  # a retry pass has the whole retry budget again
        locked.revision += 1
        locked.save()
    if launch:
        run_launch(run=locked)
    return replace(plan, run=locked, started=True, launched=launch)
