"""Dataset import: files and item lists in, validated and stored all or nothing.

``parsers`` reads formats into records, ``items`` maps and validates them (and
previews a file), ``store`` writes them, ``staging`` keeps an uploaded file
between the upload page and the confirmation of its field mapping.
"""

from __future__ import annotations

from runs.datasets.importers.items import (
    DEFAULT_FIELDS,
    HUMANEVAL_FIELDS,
    FieldMap,
    ItemRow,
    ParsedItems,
    Preview,
    guess_fields,
)
from runs.datasets.importers.parsers import (
    FORMATS,
    InvalidRecord,
    Source,
    humaneval_content,
    resolve_format,
)
from runs.datasets.importers.store import (
    BATCH_SIZE,
    dataset_create_from_items,
    dataset_create_from_rows,
    dataset_find_by_hash,
    dataset_import,
    dataset_imports_clean,
    dataset_preview,
    parse_items,
    parse_records,
    preview_file,
)

__all__ = [
    "BATCH_SIZE",
    "DEFAULT_FIELDS",
    "FORMATS",
    "HUMANEVAL_FIELDS",
    "FieldMap",
    "InvalidRecord",
    "ItemRow",
    "ParsedItems",
    "Preview",
    "Source",
    "dataset_create_from_items",
    "dataset_create_from_rows",
    "dataset_find_by_hash",
    "dataset_import",
    "dataset_imports_clean",
    "dataset_preview",
    "guess_fields",
    "humaneval_content",
    "parse_items",
    "parse_records",
    "preview_file",
    "resolve_format",
]
