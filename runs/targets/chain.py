"""Another run's outputs as this run's inputs, item by item, sent to a target.

A chain names its source run and the target its inputs go to, as
promptflow's runs reference another run's outputs (``${run.outputs.x}``)
beside the data (``${data.x}``). The template sees the item's fields and
``{run.output}``, the source run's output for the same item; by default the
output itself is the input (its JSON type kept).

The source run must belong to the same project and be over the same dataset
(items are matched by position in it); it is checked when the run is created
(``prepare_for_run``), which also freezes a saved target's configuration into
the run. An item that has no succeeded result in the source run (of its first
epoch that has one) is a permanent error.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any, ClassVar

from channels.db import database_sync_to_async
from pydantic import Field, field_validator, model_validator

from runs.errors import ConfigError, InvalidInput
from runs.models import Dataset, ErrorKind, Project, Result, Run
from runs.models import Target as SavedTarget
from runs.plugins import FieldError, Params, SecretRef, TargetContext, join
from runs.plugins.targets import (
    Target,
    TargetError,
    TargetInput,
    TargetOutput,
    TargetPlugin,
    build_target,
    clean_target_config,
    get_target_class,
    register,
)
from runs.secrets.redaction import NO_SECRETS, Redactor
from runs.secrets.store import check_secrets_bound, secret_scope, target_context
from runs.targets.templating import (
    ITEM_ROOTS,
    item_fields,
    placeholders,
    render_json,
)

ROOTS = ITEM_ROOTS | {"run"}


class ChainParams(Params):
    run: int = Field(
        ge=1,
        title="Source run",
        description=(
            "Id of a finished run of this project over the same dataset, "
            "whose outputs become this run's inputs."
        ),
    )
    target: dict[str, Any] = Field(
        description=(
            'Where the inputs go: {"kind": "openai_chat", "config": {...}}, '
            'or {"id": N} for a saved target of this project (its '
            "configuration is frozen into the run)."
        ),
    )
    template: str = Field(
        "{run.output}",
        max_length=100_000,
        description=(
            "The input sent for each item: {run.output} (the source run's "
            "output, or {run.output.key} of an object), {input}, {expected}, "
            "{metadata.key}, {external_id}. Exactly {run.output} sends the "
            "output with its JSON type."
        ),
        json_schema_extra={"x-widget": "textarea"},
    )

    @field_validator("template")
    @classmethod
    def _names(cls, template: str) -> str:
        for _, path in placeholders(template):
            root, _, rest = path.partition(".")
            if root not in ROOTS:
                raise ValueError(
                    f"{{{path}}} is not a field: use {{run.output}} or one of "
                    f"{', '.join('{' + r + '}' for r in sorted(ITEM_ROOTS))}"
                )
            if root == "run" and not (rest == "output" or rest.startswith("output.")):
                raise ValueError(f"{{{path}}}: a source run gives only run.output")
        return template

    @model_validator(mode="after")
    def _inner_target(self) -> ChainParams:
        target = self.target
        if "id" in target:
            if set(target) != {"id"}:
                raise FieldError("target", "give either id or kind and config")
            if isinstance(target["id"], bool) or not isinstance(target["id"], int):
                raise FieldError("target.id", "must be a target's id (a number)")
            return self
        if set(target) - {"kind", "config"}:
            extra = sorted(set(target) - {"kind", "config"})[0]
            raise FieldError(f"target.{extra}", "is not kind, config or id")
        kind = target.get("kind")
        if kind == ChainTarget.kind:
            raise FieldError(
                "target.kind", "a chain cannot send to a chain; chain its source run"
            )
        try:
            config = clean_target_config(
                kind,
                target.get("config") or {},
                path="target.config",
                kind_field="target.kind",
            )
        except ConfigError as exc:
            raise FieldError(exc.field or "target", exc.message) from None
        self.target = {"kind": kind, "config": config}
        return self


def _prefixed(path: str, exc: InvalidInput) -> ConfigError:
    return ConfigError(exc.message, field=f"{path}.{exc.field}" if exc.field else path)


@register
class ChainTarget(TargetPlugin[ChainParams]):
    """Another run's outputs as this run's inputs, item by item: each item's
    output in the source run (same project, same dataset) is put into a
    template beside the item's fields ({run.output}, {input}, ...) and sent to
    a target. Items without a succeeded output in the source run fail
    permanently, naming it.
    """

    kind: ClassVar[str] = "chain"
    label: ClassVar[str] = "Chain another run's outputs"
    example: ClassVar[dict[str, Any]] = {
        "run": 12,
        "target": {
            "kind": "openai_chat",
            "config": {
                "base_url": "https://api.openai.com/v1",
                "model": "gpt-4o-mini",
                "api_key_secret": "OPENAI_API_KEY",
            },
        },
        "template": "Improve this answer: {run.output}\n\nQuestion: {input}",
    }
    # Built with the run's context: the source run is read in its project.
    needs_context: ClassVar[bool] = True

    def __init__(
        self, params: ChainParams, context: TargetContext | None = None
    ) -> None:
        self.params = params
        self.source_id = params.run
        self.project_id = context.project_id if context else None
        self.template = params.template
        self.inner: Target | None = None
        # The inner target's secrets are its own, not the run's: what it
        # answers is redacted of them here (the run redacts its own).
        self.redactor = NO_SECRETS
        self.ready = asyncio.Lock()

    @classmethod
    def secret_scope(
        cls, config: dict[str, Any]
    ) -> tuple[Sequence[SecretRef], dict[str, Any], str]:
        """The chained target's secrets, named in ``target.config``.

        A saved target's (``{"id": N}``) are checked when its configuration
        is frozen into a run (``prepare_for_run``).
        """
        target = config.get("target") or {}
        if "kind" not in target:
            return (), {}, "target.config"
        refs, inner, path = secret_scope(
            get_target_class(target["kind"]), target.get("config") or {}
        )
        return refs, inner, join("target.config", path) if path else "target.config"

    @classmethod
    def prepare_for_run(
        cls, config: dict[str, Any], *, project: Project, dataset: Dataset, path: str
    ) -> tuple[dict[str, Any], Run]:
        """The configuration a run freezes, checked against its project and dataset.

        A run of another project is "not found", as one that does not exist.
        """
        source = Run.objects.filter(pk=config["run"], project=project).first()
        if source is None:
            raise ConfigError(
                f"there is no run {config['run']} in {project}", field=f"{path}.run"
            )
        if source.dataset_id != dataset.pk:
            raise ConfigError(
                f"run {source.pk} is over another dataset; a chain follows its "
                "source run item by item, so choose the same dataset",
                field=f"{path}.run",
            )
        if not source.is_final:
            raise ConfigError(
                f"run {source.pk} has not finished; chain it once it has",
                field=f"{path}.run",
            )
        target = config["target"]
        if "id" in target:
            saved = SavedTarget.objects.filter(pk=target["id"], project=project).first()
            if saved is None:
                raise ConfigError(
                    f"there is no target {target['id']} in {project}",
                    field=f"{path}.target.id",
                )
            if saved.kind == cls.kind:
                raise ConfigError(
                    "a chain cannot send to a chain", field=f"{path}.target.id"
                )
            target = {"kind": saved.kind, "config": saved.config}
            config = {**config, "target": target}
        try:
            check_secrets_bound(
                project=project, kind=target["kind"], config=target["config"]
            )
        except InvalidInput as exc:
            raise _prefixed(f"{path}.target.config", exc) from None
        return config, source

    async def start(self) -> Target:
        """The inner target, built with its own secrets on first use."""
        async with self.ready:
            if self.inner is None:
                self.inner = await database_sync_to_async(self._build_inner)()
            return self.inner

    def _build_inner(self) -> Target:
        if (
            self.project_id is None
            or not Run.objects.filter(
                pk=self.source_id, project_id=self.project_id
            ).exists()
        ):
            raise TargetError(
                f"there is no run {self.source_id} in this run's project",
                kind=ErrorKind.PERMANENT,
                error_type="ChainSource",
            )
        target = self.params.target
        if "id" in target:  # frozen at run creation; only an unprepared config
            raise TargetError(
                "the chained target was not resolved when the run was created",
                kind=ErrorKind.PERMANENT,
                error_type="ChainConfig",
            )
        try:
            context = target_context(self.project_id, target["kind"], target["config"])
            inner = build_target(target["kind"], target["config"], context=context)
            self.redactor = Redactor.of(context)
            return inner
        except ConfigError as exc:
            raise TargetError(
                f"the chained target's configuration: {exc}",
                kind=ErrorKind.PERMANENT,
                error_type="ConfigError",
            ) from None

    def source_output(self, index: int) -> list[Any]:
        # One indexed read per item: (run, item_index, epoch) is an index.
        return list(
            Result.objects.filter(
                run_id=self.source_id,
                item_index=index,
                status=Result.Status.SUCCEEDED,
            )
            .order_by("epoch")
            .values_list("output", flat=True)[:1]
        )

    async def generate(self, item: TargetInput) -> TargetOutput:
        inner = self.inner or await self.start()
        found = await database_sync_to_async(self.source_output)(item.index)
        if not found:
            raise TargetError(
                f"run {self.source_id} has no output for this item",
                kind=ErrorKind.PERMANENT,
                error_type="NoSourceOutput",
            )
        fields = item_fields(item, run={"output": found[0]})
        chained = render_json(self.template, fields, item, what="template")
        chained_item = TargetInput(
            index=item.index,
            external_id=item.external_id,
            input=chained,
            expected=item.expected,
            metadata=item.metadata,
        )
        if not self.redactor:
            return await inner.generate(chained_item)
        try:
            answer = await inner.generate(chained_item)
        except TargetError as exc:
            exc.message, exc.raw_body = await self.redactor.redacted(
                [exc.message, exc.raw_body]
            )
            exc.args = (exc.message,)
            raise
        except Exception as exc:  # its text goes to the result: redacted first
            raise TargetError(
                self.redactor.text(f"{type(exc).__name__}: {exc}"),
                kind=ErrorKind.PERMANENT,
                error_type=type(exc).__name__,
            ) from None
        answer.output, answer.raw_body, answer.model = await self.redactor.redacted(
            [answer.output, answer.raw_body, answer.model]
        )
        return answer

    async def aclose(self) -> None:
        if self.inner is not None:
            await self.inner.aclose()
