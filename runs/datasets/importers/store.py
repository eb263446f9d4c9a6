"""Storing datasets: all or nothing for the people using them, short for the database.

Every item is validated before anything is written, so a bad line 9000 stores
nothing. The items are then written in batches, each its own short transaction
(SQLite has one write lock: one long transaction would make every other
writer wait for the whole import), under a dataset in the ``importing`` state
that nobody sees. One last update makes it ``ready`` and numbers its version.
If writing fails, the dataset and its items are deleted; an import whose
process died is deleted by the next import once it has been silent for
``STALE_IMPORT``.
"""

from __future__ import annotations

import itertools
import logging
from collections.abc import Callable, Iterable
from datetime import timedelta
from pathlib import PurePath
from typing import Any, TypedDict, Unpack

from django.contrib.auth.models import User
from django.db import IntegrityError, connection, transaction
from django.db.models import Max
from django.utils import timezone

from runs.access import Action, require
from runs.datasets.importers import items as validation
from runs.datasets.importers.layouts import LAYOUTS, layout_records
from runs.datasets.importers.parsers import (
    ReadBudget,
    Source,
    Where,
    humaneval_content,
    record_reader,
    resolve_format,
)
from runs.errors import Conflict, InvalidInput
from runs.models import Dataset, Item, Project
from runs.records import plain_rows
from runs.records.names import clean_name

BATCH_SIZE = 250
# What an import fills of each item, in this order (plain_rows).
ITEM_FIELDS = ("dataset_id", "index", "external_id", "input", "expected", "metadata")
VERSION_ATTEMPTS = 5
STALE_IMPORT = timedelta(minutes=10)

logger = logging.getLogger(__name__)


# -- parsing (no database) -----------------------------------------------------------


def parse_items(
    *,
    content: bytes | str | None = None,
    source: Source | None = None,
    format: str | None = None,
    filename: str = "",
    fields: validation.FieldMap = validation.DEFAULT_FIELDS,
) -> validation.ParsedItems:
    """Parse and validate a whole file, given as ``content`` or as a ``source``.

    HumanEval has its own field mapping; without content it is the packaged set.
    """
    if source is None:
        source = Source.from_bytes(content or b"", name=filename)
    fmt = resolve_format(format=format, filename=filename or source.name)
    if fmt == "humaneval":
        if not source.size:
            source = Source.from_bytes(humaneval_content(), name="HumanEval.jsonl")
        fields = validation.HUMANEVAL_FIELDS
    fields.validate()
    source.check_size()
    budget = ReadBudget.start()
    parsed = validation.normalise(_records(source, fmt, budget), fields=fields, fmt=fmt)
    budget.end()
    return parsed


def parse_records(
    *, items: list[Any], fields: validation.FieldMap = validation.DEFAULT_FIELDS
) -> validation.ParsedItems:
    """Validate a list of item objects, naming the 1-based record on errors."""
    if not isinstance(items, list):
        raise InvalidInput("must be a list of objects", field="items")
    fields.validate()

    def records() -> Any:
        return ((Where(record=n), item) for n, item in enumerate(items, start=1))

    return validation.normalise(
        records, fields=fields, fmt="api", empty="there are no items"
    )


def preview_file(*, source: Source, format: str | None = None) -> validation.Preview:
    """The fields a file's records have, how many have each, and the first rows."""
    fmt = resolve_format(format=format, filename=source.name)
    if fmt == "humaneval" and not source.size:
        source = Source.from_bytes(humaneval_content(), name="HumanEval.jsonl")
    source.check_size()
    return validation.preview(_records(source, fmt, ReadBudget.start()), fmt=fmt)


def dataset_preview(
    *,
    project: Project,
    user: User,
    source: Source,
    format: str | None = None,
) -> validation.Preview:
    """``preview_file`` for someone who may import into ``project`` (an editor)."""
    require(user, project, Action.EDIT)
    return preview_file(source=source, format=format)


def _records(source: Source, fmt: str, budget: ReadBudget) -> Any:
    """The source's records, made into items first for a benchmark layout."""
    read = record_reader(source, fmt, budget=budget)
    return layout_records(read, fmt) if fmt in LAYOUTS else read


# -- storing -------------------------------------------------------------------------


def dataset_find_by_hash(
    *, project: Project, name: str, content_hash: str
) -> Dataset | None:
    """The newest version of ``name`` in ``project`` with exactly this content."""
    return (
        Dataset.objects.filter(project=project, name=name, content_hash=content_hash)
        .order_by("-version")
        .first()
    )


class ImportOptions(TypedDict, total=False):
    """Options every import takes: the source's fields for the id, the input and
    the expected answer (defaults ``id``, ``input``, ``expected``; an empty or
    None ``expected_field`` says that the items have no expected answer), the
    dataset's description, and whether an identical newest version is reused
    instead of stored again."""

    id_field: str
    input_field: str
    expected_field: str | None
    description: str
    reuse_identical: bool


def dataset_import(
    *,
    project: Project,
    user: User | None,
    name: str,
    content: bytes | str | None = None,
    source: Source | None = None,
    format: str | None = None,
    filename: str = "",
    **options: Unpack[ImportOptions],
) -> Dataset:
    """Store a dataset file as a new version of ``name``, all or nothing.

    A named ``expected_field`` that no item has is an error that lists the fields.
    """

    def parse(fields: validation.FieldMap) -> validation.ParsedItems:
        return parse_items(
            content=content,
            source=source,
            format=format,
            filename=filename,
            fields=fields,
        )

    source_name = PurePath(filename or (source.name if source else "")).name
    return _import(project, user, name, parse, options, source_name=source_name)


def dataset_create_from_items(
    *,
    project: Project,
    user: User | None,
    name: str,
    items: list[dict[str, Any]],
    **options: Unpack[ImportOptions],
) -> Dataset:
    """Store a list of item objects as a new version of ``name``, all or nothing."""

    def parse(fields: validation.FieldMap) -> validation.ParsedItems:
        return parse_records(items=items, fields=fields)

    return _import(project, user, name, parse, options)


def _import(
    project: Project,
    user: User | None,
    name: str,
    parse: Callable[[validation.FieldMap], validation.ParsedItems],
    options: ImportOptions,
    *,
    source_name: str = "",
) -> Dataset:
    """Parse with the options' field mapping, then store, as ``options`` say."""
    draft = _draft(
        project=project,
        user=user,
        name=name,
        description=options.get("description", ""),
    )
    draft.source_name = source_name[:255]
    fields = validation.FieldMap.of(
        id_field=options.get("id_field", "id"),
        input_field=options.get("input_field", "input"),
        expected_field=options.get("expected_field", "expected"),
    )
    return _store(
        draft=draft,
        parsed=parse(fields),
        reuse_identical=options.get("reuse_identical", False),
    )


def dataset_create_from_rows(
    *,
    project: Project,
    user: User | None,
    name: str,
    read_rows: Callable[[], Iterable[validation.ItemRow]],
    source_format: str,
    source_name: str = "",
    description: str = "",
) -> Dataset:
    """Store items taken from stored datasets as a new version of ``name``.

    ``read_rows`` is called again for each pass over the items (checking,
    hashing, writing), so that they need not all be held in memory.
    """
    draft = _draft(project=project, user=user, name=name, description=description)
    draft.source_name = source_name[:255]
    parsed = validation.parse_rows(read_rows, fmt=source_format)
    return _store(draft=draft, parsed=parsed, reuse_identical=False)


def dataset_imports_clean(*, silent_for: timedelta = STALE_IMPORT) -> int:
    """Delete imports in progress that have not written anything for a while."""
    stale = Dataset.all_objects.filter(
        status=Dataset.Status.IMPORTING,
        import_touched_at__lt=timezone.now() - silent_for,
    )
    ids = list(stale.values_list("pk", flat=True))
    for dataset_id in ids:
        logger.warning("deleting the unfinished import of dataset %s", dataset_id)
        _discard(dataset_id)
    return len(ids)


def _draft(
    *, project: Project, user: User | None, name: str, description: str
) -> Dataset:
    """An unsaved dataset, once the user may create it and its name is good."""
    # No user means a trusted caller: the command line or the demo seeder.
    if user is not None:
        require(user, project, Action.EDIT)
    name = clean_name(name, model=Dataset)
    return Dataset(project=project, name=name, description=description, created_by=user)


def _store(
    *, draft: Dataset, parsed: validation.ParsedItems, reuse_identical: bool
) -> Dataset:
    draft.content_hash = parsed.content_hash
    draft.item_count = parsed.count
    draft.source_format = parsed.format
    draft.expected_count = parsed.expected_count
    draft.expected_field = parsed.field_map.expected or ""
    draft.field_counts = parsed.fields
    if reuse_identical and (existing := _identical(draft)) is not None:
        return existing
    dataset_imports_clean()
    draft.status = Dataset.Status.IMPORTING
    draft.version = 0
    draft.import_touched_at = timezone.now()
    # Inside a caller's transaction (a command that also creates a run), the
    # batches are savepoints and the caller's rollback undoes everything.
    owned = not connection.in_atomic_block
    with transaction.atomic():
        draft.save(force_insert=True)
    try:
        # Small batches, each built before its transaction: the write lock is
        # held only for the inserts themselves.
        for batch in itertools.batched(parsed.read_rows(), BATCH_SIZE):
            rows = _item_rows(draft.pk, batch)
            with transaction.atomic():
                plain_rows.insert(plain_rows.table(Item, ITEM_FIELDS), rows)
                Dataset.all_objects.filter(pk=draft.pk).update(
                    import_touched_at=timezone.now()
                )
        return _publish(draft, reuse_identical=reuse_identical)
    except BaseException:
        if owned:
            _discard(draft.pk)
        raise


def _item_rows(
    dataset_id: int, batch: Iterable[validation.ItemRow]
) -> list[tuple[Any, ...]]:
    # Plain rows, as the executor stores results: a model instance per item
    # cost more than the rest of the import.
    defaults = plain_rows.table(Item, ITEM_FIELDS).defaults
    return [
        (
            dataset_id,
            row.index,
            row.external_id,
            plain_rows.json_text(row.input),
            plain_rows.json_text(row.expected),
            plain_rows.json_text(row.metadata),
            *defaults,
        )
        for row in batch
    ]


def _identical(draft: Dataset) -> Dataset | None:
    return dataset_find_by_hash(
        project=draft.project, name=draft.name, content_hash=draft.content_hash
    )


def _publish(draft: Dataset, *, reuse_identical: bool) -> Dataset:
    """Make the import visible under the next free version number."""
    versions = Dataset.objects.filter(project=draft.project, name=draft.name)
    for _ in range(VERSION_ATTEMPTS):
        if reuse_identical and (existing := _identical(draft)) is not None:
            _discard(draft.pk)
            return existing
        version = (versions.aggregate(v=Max("version"))["v"] or 0) + 1
        try:
            # A savepoint, so that losing the race keeps a caller's transaction.
            with transaction.atomic():
                published = Dataset.all_objects.filter(
                    pk=draft.pk, status=Dataset.Status.IMPORTING
                ).update(
                    status=Dataset.Status.READY,
                    version=version,
                    import_touched_at=None,
                )
        except IntegrityError:
            # Only a concurrent import that took this version is worth a retry.
            if not versions.filter(version=version).exists():
                raise
            continue
        if not published:
            raise Conflict("the import was silent too long and was discarded; retry")
        draft.status, draft.version, draft.import_touched_at = (
            Dataset.Status.READY,
            version,
            None,
        )
        return draft
    raise Conflict(f"too many concurrent imports of {draft.name!r}; try again")


def _discard(dataset_id: int) -> None:
    """Delete an unfinished import, its items in batches of short transactions."""
    items = Item.objects.filter(dataset_id=dataset_id)
    while ids := list(items.values_list("pk", flat=True)[:BATCH_SIZE]):
        with transaction.atomic():
            Item.objects.filter(pk__in=ids).delete()
    Dataset.all_objects.filter(pk=dataset_id, status=Dataset.Status.IMPORTING).delete()
