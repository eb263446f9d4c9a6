"""Create an API key for a user and print it once.

    python manage.py create_api_key USERNAME [--name NAME]

Only the key goes to stdout, on its own line, so that scripts can capture it:
``KEY=$(python manage.py create_api_key alice)``.
"""

from __future__ import annotations

from argparse import ArgumentParser
from typing import Any

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError

from runs.projects.services import api_key_create


class Command(BaseCommand):
    help = "Create an API key for USERNAME; the key is printed once, never stored."

    def add_arguments(self, parser: ArgumentParser) -> None:
        parser.add_argument("username")
        parser.add_argument("--name", default="", help="what the key is for")

    def handle(self, *args: Any, username: str, name: str, **options: Any) -> None:
        User = get_user_model()
        try:
            user = User.objects.get_by_natural_key(username)
        except User.DoesNotExist:
            raise CommandError(f"no user named {username!r}") from None
        key, plain = api_key_create(user=user, name=name)
        self.stdout.write(plain)
        self.stderr.write(
            f"API key {key.name!r} ({key.prefix}) for {username}; it is shown "
            "only this once. Send it as 'Authorization: Bearer <key>'.",
            style_func=self.style.SUCCESS,
        )
