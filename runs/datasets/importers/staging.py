"""Uploaded files that wait for their field mapping to be confirmed.

The upload page stores the file first, shows its fields and first rows, and
imports it once the person has said which field is which. Between the two
steps the file lives on disk, under ``EVALSITE_DATA_DIR/uploads/<user id>/``,
not in the database: it may be hundreds of megabytes, which would bloat the
database and, in SQLite, hold its only write lock while being written. A
staged file belongs to the user who uploaded it (another user's token finds
nothing), expires after ``EVALSITE_UPLOAD_TTL_SECONDS``, and each user keeps
at most ``MAX_PER_USER`` of them; expired ones are deleted whenever anyone
uploads. With several web servers, ``EVALSITE_DATA_DIR`` must be shared (or
sessions sticky) for the second step to find the file.
"""

from __future__ import annotations

import json
import re
import secrets
import shutil
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from django.conf import settings
from django.contrib.auth.models import User

from runs.access import Action, require
from runs.datasets.importers.items import FieldMap, Preview
from runs.datasets.importers.parsers import Source
from runs.datasets.importers.store import dataset_import, preview_file
from runs.errors import NotFound
from runs.models import Dataset, Project
from runs.private_files import private_dir, private_opener

MAX_PER_USER = 3
_TOKEN = re.compile(r"[A-Za-z0-9_-]{32}")
_DATA = "data"
_META = "meta.json"


@dataclass(frozen=True)
class StagedUpload:
    """A file waiting for its mapping, with what step one learnt about it."""

    token: str
    owner_id: int
    project_id: int
    name: str
    format: str
    filename: str
    description: str
    preview: Preview

    @property
    def directory(self) -> Path:
        return _root() / str(self.owner_id) / self.token

    @property
    def source(self) -> Source:
        return Source.from_path(self.directory / _DATA, name=self.filename)


def upload_stage(
    *,
    user: User,
    project: Project,
    upload: Any,
    name: str,
    format: str | None,
    description: str,
) -> StagedUpload:
    """Keep an uploaded file for its mapping step, once it parses as records."""
    require(user, project, Action.EDIT)
    uploaded = Source.from_upload(upload)
    uploaded.check_size()
    preview = preview_file(source=uploaded, format=format)
    uploads_clean(user=user, keep=MAX_PER_USER - 1)
    token = secrets.token_urlsafe(24)
    directory = _root() / str(user.pk) / token
    private_dir(directory)
    with open(directory / _DATA, "wb", opener=private_opener) as out:
        for chunk in upload.chunks():
            out.write(chunk)
    staged = StagedUpload(
        token=token,
        owner_id=user.pk,
        project_id=project.pk,
        name=name,
        format=preview.format,
        filename=uploaded.name,
        description=description,
        preview=preview,
    )
    meta = asdict(staged)
    meta["preview"]["guess"] = preview.guess.as_dict()
    with open(directory / _META, "w", opener=private_opener) as out:
        out.write(json.dumps(meta))
    return staged


def upload_get(*, user: User, token: str) -> StagedUpload:
    """The user's staged upload ``token``, unless it has expired."""
    directory = _root() / str(user.pk) / token
    if not _TOKEN.fullmatch(token) or _expired(directory):
        raise NotFound("this upload has expired or does not exist; upload it again")
    try:
        meta = json.loads((directory / _META).read_text())
    except (OSError, ValueError):
        raise NotFound("this upload is incomplete; upload it again") from None
    saved = meta.pop("preview")
    guess = saved.pop("guess")
    preview = Preview(
        **saved,
        guess=FieldMap(
            id=guess["id"], input=guess["input"], expected=guess["expected"]
        ),
    )
    return StagedUpload(**{**meta, "owner_id": user.pk}, preview=preview)


def upload_import(
    *,
    staged: StagedUpload,
    project: Project,
    user: User,
    id_field: str,
    input_field: str,
    expected_field: str | None,
) -> Dataset:
    """Import a staged upload with the mapping chosen, then forget the file."""
    dataset = dataset_import(
        project=project,
        user=user,
        name=staged.name,
        source=staged.source,
        format=staged.format,
        id_field=id_field,
        input_field=input_field,
        expected_field=expected_field,
        description=staged.description,
    )
    upload_discard(staged=staged)
    return dataset


def upload_discard(*, staged: StagedUpload) -> None:
    """Delete a staged upload, once imported or abandoned."""
    shutil.rmtree(staged.directory, ignore_errors=True)


def uploads_clean(*, user: User | None = None, keep: int = 0) -> int:
    """Delete every expired staged upload, and the user's beyond the newest ``keep``."""
    root = _root()
    removed = 0
    owners = [path for path in root.iterdir() if path.is_dir()] if root.is_dir() else []
    for owner in owners:
        # Newest first; another request may be deleting some of them meanwhile.
        staged = sorted(
            (path for path in owner.iterdir() if path.is_dir()),
            key=_modified,
            reverse=True,
        )
        mine = user is not None and owner.name == str(user.pk)
        for position, directory in enumerate(staged):
            if _expired(directory) or (mine and position >= keep):
                shutil.rmtree(directory, ignore_errors=True)
                removed += 1
    return removed


def _root() -> Path:
    return Path(settings.DATA_DIR) / "uploads"


def _modified(directory: Path) -> float:
    try:
        return directory.stat().st_mtime
    except OSError:  # already deleted
        return 0.0


def _expired(directory: Path) -> bool:
    age = time.time() - _modified(directory)
    return age > settings.EVALSITE_UPLOAD_TTL_SECONDS
