"""Import a dataset file from the command line, all or nothing."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.db import transaction

from runs import services
from runs.errors import DomainError
from runs.importers import FORMATS, dataset_import
from runs.models import Project


class Command(BaseCommand):
    help = (
        "Import a JSONL, CSV, JSON or YAML file (or the bundled HumanEval set) as "
        "a new dataset version. Any bad line stops the import and stores nothing."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "file", nargs="?", help="the file to import; not needed for humaneval"
        )
        parser.add_argument("--project", required=True, help="the project's name")
        parser.add_argument("--name", help="dataset name (default: the file stem)")
        parser.add_argument(
            "--format", choices=FORMATS, help="default: from the file extension"
        )
        parser.add_argument("--id-field", default="id")
        parser.add_argument("--input-field", default="input")
        parser.add_argument("--expected-field", default="expected")
        parser.add_argument("--description", default="")
        parser.add_argument(
            "--create-project",
            action="store_true",
            help="create the project if it does not exist",
        )
        parser.add_argument(
            "--owner", help="with --create-project: the user who becomes its admin"
        )

    def handle(self, *args: Any, **opts: Any) -> None:
        file: str | None = opts["file"]
        if opts["owner"] and not opts["create_project"]:
            raise CommandError("--owner only applies with --create-project")
        if file is None and opts["format"] != "humaneval":
            raise CommandError("give a FILE to import (only humaneval needs none)")
        content = self._read(file) if file else b""
        name = opts["name"] or (Path(file).stem if file else "humaneval")
        try:
            # One transaction: a bad file must not leave a new, empty project.
            with transaction.atomic():
                dataset = dataset_import(
                    project=self._project(opts),
                    user=None,
                    name=name,
                    content=content,
                    format=opts["format"],
                    filename=Path(file).name if file else "",
                    id_field=opts["id_field"],
                    input_field=opts["input_field"],
                    expected_field=opts["expected_field"],
                    description=opts["description"],
                )
        except DomainError as exc:
            raise CommandError(str(exc)) from None
        self.stdout.write(
            f"imported {dataset.name} v{dataset.version}: {dataset.item_count} items "
            f"(hash {dataset.content_hash[:12]})"
        )

    def _read(self, file: str) -> bytes:
        try:
            return Path(file).read_bytes()
        except OSError as exc:
            raise CommandError(f"cannot read {file}: {exc.strerror}") from None

    def _project(self, opts: dict[str, Any]) -> Project:
        name: str = opts["project"]
        project = Project.objects.filter(name=name).first()
        if project is not None:
            return project
        if not opts["create_project"]:
            raise CommandError(
                f"no project named {name!r}; add --create-project to create it"
            )
        if not opts["owner"]:
            # A project without members would be invisible to everyone.
            raise CommandError(
                "--create-project needs --owner USERNAME, who becomes its admin"
            )
        user_model = get_user_model()
        lookup = {user_model.USERNAME_FIELD: opts["owner"]}
        owner = user_model._default_manager.filter(**lookup).first()
        if owner is None:
            raise CommandError(f"no user named {opts['owner']!r}")
        return services.project_create(name=name, owner=owner)
