"""Project secrets: stored encrypted, written by project admins, read only by targets.

The value of a secret is encrypted with Fernet (AES-128-CBC with an HMAC)
under ``settings.EVALSITE_SECRETS_KEYS``, keys kept outside the database (an
environment variable or a file beside the database made once with mode 0600).
Several keys allow rotation: the first encrypts, every one decrypts, and
``manage.py secrets_rotate`` re-encrypts every value with the first.

A plug-in declares the configuration fields that name its secrets
(``SecretRef``); this module validates those names when a configuration is
saved, and resolves them to values only when the executor builds the plug-in
for a run (``TargetContext``). Values never enter a stored configuration, an
attempt log, an error message or a log line.

Every secret is bound to the hosts it may be sent to (``runs.secrets.destinations``):
a project secret by a project admin, with its value; an environment variable,
possible only for names the operator lists in ``EVALSITE_ENV_SECRETS``, by the
operator. ``bound_secret`` is the one check, made when a configuration that
names a secret is saved, when a run is created or re-scored, and when the
value is resolved for a request (a run, a re-scoring pass, the try button):
the URL the plug-in sends to must match one of the secret's patterns.
"""

from __future__ import annotations

import dataclasses
import functools
import os
import re
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from channels.db import database_sync_to_async
from django.conf import settings
from django.contrib.auth.models import AnonymousUser, User
from django.db import IntegrityError, transaction
from django.db.models import QuerySet

from runs.access import Action, require
from runs.errors import ConfigError, Conflict, InvalidInput, NotFound
from runs.models import Project, ProjectSecret, Run
from runs.plugins.declaration import Plugin, SecretRef, TargetContext
from runs.plugins.scorers import SCORERS
from runs.plugins.targets import get_target_class
from runs.secrets import destinations

if TYPE_CHECKING:
    from cryptography.fernet import MultiFernet

NAME_PATTERN = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
MAX_NAME_LENGTH = 100
MAX_VALUE_LENGTH = 8192
NO_HOSTS = (
    "name at least one host the secret may be sent to, such as api.openai.com "
    "(https, port 443) or http://127.0.0.1:8000"
)


class SecretUnavailable(Exception):
    """A stored secret that none of the configured keys decrypts."""


# -- encryption ------------------------------------------------------------------


# cryptography is imported when a secret is first encrypted or decrypted: the
# targets import this module, and most runs (every evalrun without a secret)
# never need it.


@functools.lru_cache(maxsize=4)
def _cipher(keys: tuple[str, ...]) -> MultiFernet:
    from cryptography.fernet import Fernet, MultiFernet

    return MultiFernet([Fernet(key.encode("ascii")) for key in keys])


def cipher() -> MultiFernet:
    return _cipher(tuple(settings.EVALSITE_SECRETS_KEYS))


def encrypt(value: str) -> str:
    return cipher().encrypt(value.encode()).decode("ascii")


def decrypt(ciphertext: str, *, name: str) -> str:
    from cryptography.fernet import InvalidToken

    try:
        return cipher().decrypt(ciphertext.encode("ascii")).decode()
    except InvalidToken:
        raise SecretUnavailable(
            f"project secret {name!r} cannot be decrypted with the configured "
            "EVALSITE_SECRETS_KEY: every process that runs targets (each worker "
            "too) needs the key the secret was set with; or set the secret again"
        ) from None


# -- services and selector ---------------------------------------------------------


def clean_secret_name(name: Any, *, field_name: str = "name") -> str:
    name = str(name or "").strip()
    if not name:
        raise InvalidInput("is required", field=field_name)
    if len(name) > MAX_NAME_LENGTH or not NAME_PATTERN.fullmatch(name):
        raise InvalidInput(
            "must be letters, digits and underscores, not starting with a digit "
            f"(at most {MAX_NAME_LENGTH})",
            field=field_name,
        )
    return name


def _clean_value(value: Any) -> str:
    # Pasted keys often carry a trailing newline, which no header may hold.
    value = str(value or "").strip()
    if not value:
        raise InvalidInput("is required", field="value")
    if len(value) > MAX_VALUE_LENGTH:
        raise InvalidInput(
            f"is longer than {MAX_VALUE_LENGTH} characters", field="value"
        )
    if any(ord(char) < 32 or ord(char) == 127 for char in value):
        raise InvalidInput("must not contain control characters", field="value")
    return value


def clean_hosts(hosts: Any) -> list[str]:
    """The patterns a secret is bound to, canonical; InvalidInput naming one."""
    if isinstance(hosts, str) or not isinstance(hosts, Sequence):
        raise InvalidInput("must be a list of hosts", field="hosts")
    cleaned: list[str] = []
    for position, host in enumerate(hosts):
        try:
            pattern = str(destinations.HostPattern.parse(str(host)))
        except ValueError as exc:
            raise InvalidInput(str(exc), field=f"hosts[{position}]") from None
        if pattern not in cleaned:
            cleaned.append(pattern)
    if not cleaned:
        raise InvalidInput(NO_HOSTS, field="hosts")
    if len(cleaned) > destinations.MAX_PATTERNS:
        raise InvalidInput(f"at most {destinations.MAX_PATTERNS} hosts", field="hosts")
    return cleaned


def secret_set(
    *,
    project: Project,
    user: User,
    name: str,
    value: str | None = None,
    hosts: Sequence[str] | None = None,
) -> tuple[ProjectSecret, bool]:
    """Create or change a project secret (admins only); True when created.

    A new secret needs its value and its hosts; an existing one keeps what is
    not given (None), so its hosts can be changed without its value.
    """
    require(user, project, Action.MANAGE)
    name = clean_secret_name(name)
    ciphertext = encrypt(_clean_value(value)) if value is not None else None
    patterns = clean_hosts(hosts) if hosts is not None else None
    with transaction.atomic():
        secret = (
            ProjectSecret.objects.select_for_update()
            .filter(project=project, name=name)
            .first()
        )
        if secret is None:
            if ciphertext is None:
                raise InvalidInput("is required", field="value")
            if patterns is None:
                raise InvalidInput(NO_HOSTS, field="hosts")
            try:
                secret = ProjectSecret.objects.create(
                    project=project,
                    name=name,
                    ciphertext=ciphertext,
                    hosts=patterns,
                    created_by=user,
                    updated_by=user,
                )
            except IntegrityError:
                raise Conflict(
                    f"secret {name} was set by another request at the same "
                    "moment; look at it and set it again if need be"
                ) from None
            return secret, True
        if ciphertext is None and patterns is None:
            raise InvalidInput("give a new value, new hosts or both", field="value")
        if ciphertext is not None:
            secret.ciphertext = ciphertext
        if patterns is not None:
            secret.hosts = patterns
        secret.updated_by = user
        secret.save(update_fields=["ciphertext", "hosts", "updated_by", "updated_at"])
    return secret, False


def secret_delete(*, project: Project, user: User, name: str) -> None:
    """Delete a project secret (admins only)."""
    require(user, project, Action.MANAGE)
    deleted, _ = ProjectSecret.objects.filter(project=project, name=name).delete()
    if not deleted:
        raise NotFound(f"no secret named {name!r} in {project}")


def secret_list(
    *, project: Project, user: User | AnonymousUser
) -> QuerySet[ProjectSecret]:
    """The project's secrets: names, hosts and times (any member may see them)."""
    require(user, project, Action.VIEW)
    return (
        ProjectSecret.objects.filter(project=project)
        .defer("ciphertext")
        .select_related("updated_by")
        .order_by("name")
    )


def secrets_rotate() -> int:
    """Re-encrypt every secret with the first configured key; returns the count."""
    from cryptography.fernet import InvalidToken

    rotated = 0
    with transaction.atomic():
        for secret in ProjectSecret.objects.select_for_update().only(
            "pk", "name", "ciphertext"
        ):
            try:
                token = cipher().rotate(secret.ciphertext.encode("ascii"))
            except InvalidToken:
                raise SecretUnavailable(
                    f"project secret {secret.name!r} of project {secret.project_id} "
                    "cannot be decrypted with the configured keys"
                ) from None
            ProjectSecret.objects.filter(pk=secret.pk).update(
                ciphertext=token.decode("ascii")
            )
            rotated += 1
    return rotated


# -- what a plug-in declares ---------------------------------------------------------


# ``SecretRef`` and ``TargetContext`` are the plug-in core's: what a plug-in
# declares and what it is built with.


def _config_error(field_name: str, message: str) -> ConfigError:
    return ConfigError(message, field=field_name)


def secret_scope(
    plugin: type[Plugin], config: dict[str, Any]
) -> tuple[Sequence[SecretRef], dict[str, Any], str]:
    """The secrets a plug-in's configuration names, where, and that place's path
    (``Plugin.secret_scope``: a plug-in that wraps another names its inner
    plug-in's secrets inside its own configuration)."""
    return plugin.secret_scope(config)


def _url_of(ref: SecretRef, config: dict[str, Any]) -> str:
    return str(config.get(ref.url_field) or "") if ref.url_field else ""


def _where(url: str) -> str:
    destination = destinations.Destination.of(url)
    return str(destination) if destination is not None else "an undeclared URL"


def _env_refusal(name: str, ref: SecretRef) -> ConfigError:
    # One message whether or not the variable exists on the server: no oracle.
    return _config_error(
        ref.env_field or ref.secret_field,
        f"{name} is not a variable the operator allows targets to use "
        f"(EVALSITE_ENV_SECRETS); store the key as a project secret and name "
        f"it in {ref.secret_field}",
    )


def _check_env_destination(name: str, ref: SecretRef, config: dict[str, Any]) -> None:
    bindings: Mapping[str, Sequence[str]] = settings.EVALSITE_ENV_SECRETS
    if name not in bindings:
        raise _env_refusal(name, ref)
    url = _url_of(ref, config)
    if not destinations.permits(bindings[name], url):
        raise _config_error(
            ref.env_field or ref.secret_field,
            f"{name} may only be sent to {' or '.join(bindings[name])}, "
            f"not to {_where(url)}",
        )


def secret_refusal(name: str, url: str) -> str:
    """Why a project secret may not go to ``url``: one text whether the secret
    exists or not, so that it tells nothing of the project's secrets."""
    return (
        f"project secret {name} may not be sent to {_where(url)}: it is not "
        "bound to that host (a project admin sets a secret with the hosts it "
        "may be sent to, on the project's secrets page)"
    )


def bound_secret(
    *, project_id: int, ref: SecretRef, config: dict[str, Any], field: str
) -> str:
    """The ciphertext of the project secret ``ref`` names in ``config``, if it
    may be sent to the URL the configuration sends it to; else ConfigError.

    The URL is the plug-in's ``url_field``, the base of every request it makes
    with the secret (redirects are never followed); a plug-in that declares
    none may not use a project secret.
    """
    name = config.get(ref.secret_field) or ""
    url = _url_of(ref, config)
    stored = (
        ProjectSecret.objects.filter(project_id=project_id, name=name)
        .values_list("ciphertext", "hosts")
        .first()
    )
    if stored is None or not url or not destinations.permits(stored[1] or (), url):
        raise ConfigError(secret_refusal(name, url), field=field)
    return stored[0]


def clean_secret_refs(refs: Sequence[SecretRef], config: dict[str, Any]) -> None:
    """Validate (and normalise in place) the fields that name secrets.

    Needs no database: a project secret's binding is checked when a
    configuration is saved, when a run is created (``check_secrets_bound``)
    and when the value is resolved.
    """
    for ref in refs:
        secret_name = str(config.get(ref.secret_field) or "").strip()
        if secret_name and (
            len(secret_name) > MAX_NAME_LENGTH
            or not NAME_PATTERN.fullmatch(secret_name)
        ):
            raise _config_error(
                ref.secret_field, "must be the name of a project secret"
            )
        config[ref.secret_field] = secret_name
        if ref.env_field is None:
            continue
        env_name = str(config.get(ref.env_field) or "").strip()
        config[ref.env_field] = env_name
        if not env_name:
            continue
        if secret_name:
            raise _config_error(
                ref.env_field, f"give either {ref.secret_field} or {ref.env_field}"
            )
        _check_env_destination(env_name, ref, config)


def check_secrets_bound(*, project: Project, kind: str, config: dict[str, Any]) -> None:
    """Raise ConfigError naming a project secret the (cleaned) configuration
    would send where the secret is not bound (or that does not exist)."""
    check_plugin_secrets_bound(
        project=project, plugin=get_target_class(kind), config=config
    )


def check_plugin_secrets_bound(
    *, project: Project, plugin: type[Plugin], config: dict[str, Any]
) -> None:
    """``check_secrets_bound`` for any plug-in class (a target or a scorer)."""
    refs, config, path = secret_scope(plugin, config)
    for ref in refs:
        if config.get(ref.secret_field):
            bound_secret(
                project_id=project.pk,
                ref=ref,
                config=config,
                field=f"{path}.{ref.secret_field}" if path else ref.secret_field,
            )


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


def resolve_secrets(
    *, project_id: int, refs: Sequence[SecretRef], config: dict[str, Any]
) -> dict[str, str]:
    """The values of the secrets a (cleaned) configuration names, each checked
    against the URL the configuration sends it to."""
    values: dict[str, str] = {}
    for ref in refs:
        secret_name = config.get(ref.secret_field)
        env_name = config.get(ref.env_field) if ref.env_field else None
        if secret_name:
            stored = bound_secret(
                project_id=project_id, ref=ref, config=config, field=ref.secret_field
            )
            try:
                values[ref.key] = decrypt(stored, name=secret_name)
            except SecretUnavailable as exc:
                raise _config_error(ref.secret_field, str(exc)) from None
        elif env_name:
            _check_env_destination(env_name, ref, config)
            value = os.environ.get(env_name, "")
            if not value:
                # Only said of a variable the operator listed.
                raise _config_error(
                    ref.env_field or ref.secret_field,
                    f"{env_name} is listed in EVALSITE_ENV_SECRETS but not set "
                    "on the server",
                )
            values[ref.key] = value
    return values


def run_target_context(run_id: int, kind: str, config: dict[str, Any]) -> TargetContext:
    """The context a run's target is built with: its run, project and secrets."""
    project_id = (
        Run.objects.filter(pk=run_id).values_list("project_id", flat=True).get()
    )
    return dataclasses.replace(target_context(project_id, kind, config), run_id=run_id)


def target_context(project_id: int, kind: str, config: dict[str, Any]) -> TargetContext:
    """The context a project's target is built with: the secrets it names."""
    return plugin_context(
        project_id, get_target_class(kind), config, path="target_config"
    )


def plugin_context(
    project_id: int, plugin: type[Plugin], config: dict[str, Any], *, path: str
) -> TargetContext:
    """The context a project's plug-in (target or scorer) is built with."""
    if plugin.uses_context():
        config = plugin.clean(config, path=path)
    refs, config, _ = secret_scope(plugin, config)
    return TargetContext(
        project_id=project_id,
        secrets=resolve_secrets(project_id=project_id, refs=refs, config=config),
    )


def run_scorer_contexts(
    run_id: int, specs: list[dict[str, Any]]
) -> dict[str, TargetContext]:
    """The contexts of a run's scorers that declare secrets, by scorer name."""
    project_id = (
        Run.objects.filter(pk=run_id).values_list("project_id", flat=True).get()
    )
    return {
        spec["name"]: plugin_context(
            project_id,
            SCORERS[spec["kind"]],
            spec.get("params") or {},
            path=f"scorers.{spec['name']}.params",
        )
        for spec in specs
        if SCORERS[spec["kind"]].uses_context()
    }


arun_target_context = database_sync_to_async(run_target_context)
arun_scorer_contexts = database_sync_to_async(run_scorer_contexts)
