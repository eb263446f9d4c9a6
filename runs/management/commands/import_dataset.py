"""Import a dataset file from the command line, all or nothing."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError, CommandParser

from runs.datasets.importers import FORMATS, Source, dataset_import
from runs.errors import DomainError
from runs.models import Project
from runs.projects.services import project_create

FIELD_HINTS = {
    "expected_field": "--expected-field NAME, or --no-expected",
    "id_field": "--id-field NAME",
    "input_field": "--input-field NAME",
}


class Command(BaseCommand):
    help = (
        "Import a JSONL, CSV, JSON or YAML file, a MATH or GSM8K file (their own "
        "layouts), or the bundled HumanEval set, as "
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
        expected = parser.add_mutually_exclusive_group()
        expected.add_argument(
            "--expected-field",
            default="expected",
            help="the field with the expected answer (default: expected); an "
            "import where no item has it fails, listing the fields found",
        )
        expected.add_argument(
            "--no-expected",
            action="store_true",
            help="the items have no expected answer",
        )
        parser.add_argument("--description", default="")
        parser.add_argument(
            "--create-project",
            action="store_true",
            help="create the project if it does not exist (needs --owner)",
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
        source = self._source(file) if file else None
        name = opts["name"] or (Path(file).stem if file else "humaneval")
        project, created = self._project(opts)
        try:
            # No transaction around it: the import writes in short batches, so
            # that the server's other writers never wait for a whole import.
            dataset = dataset_import(
                project=project,
                user=None,
                name=name,
                source=source,
                format=opts["format"],
                id_field=opts["id_field"],
                input_field=opts["input_field"],
                expected_field=None if opts["no_expected"] else opts["expected_field"],
                description=opts["description"],
            )
        except DomainError as exc:
            if created:  # a bad file must not leave a new, empty project
                project.delete()
            hint = FIELD_HINTS.get(getattr(exc, "field", None) or "")
            raise CommandError(f"{exc} ({hint})" if hint else str(exc)) from None
        self.stdout.write(
            f"imported {dataset.name} v{dataset.version}: {dataset.item_count} items, "
            f"{dataset.expected_count} with an expected answer "
            f"(hash {dataset.content_hash[:12]})"
        )

    def _source(self, file: str) -> Source:
        path = Path(file)
        try:
            if not path.is_file():
                raise FileNotFoundError(2, "no such file")
            with path.open("rb"):
                pass
            return Source.from_path(path)
        except OSError as exc:
            raise CommandError(f"cannot read {file}: {exc.strerror}") from None

    def _project(self, opts: dict[str, Any]) -> tuple[Project, bool]:
        name: str = opts["project"]
        project = Project.objects.filter(name=name).first()
        if project is not None:
            return project, False
        if not opts["create_project"]:
            raise CommandError(
                f"no project named {name!r}; add --create-project to create it"
            )
        if not opts["owner"]:
            raise CommandError("--create-project needs --owner, the project's admin")
        user_model = get_user_model()
        lookup = {user_model.USERNAME_FIELD: opts["owner"]}
        owner = user_model._default_manager.filter(**lookup).first()
        if owner is None:
            raise CommandError(f"no user named {opts['owner']!r}")
        try:
            return project_create(name=name, owner=owner), True
        except DomainError as exc:
            raise CommandError(str(exc)) from None
