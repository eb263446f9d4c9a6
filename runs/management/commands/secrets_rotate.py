"""Re-encrypt every project secret with the first key of EVALSITE_SECRETS_KEY."""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError

from runs.secrets.store import SecretUnavailable, secrets_rotate


class Command(BaseCommand):
    help = (
        "Re-encrypt every project secret with the first key listed in "
        "EVALSITE_SECRETS_KEY. To rotate: put a new key first, keep the old one "
        "after it, run this command, then remove the old key."
    )

    def handle(self, *args: Any, **options: Any) -> None:
        try:
            count = secrets_rotate()
        except SecretUnavailable as exc:
            raise CommandError(str(exc)) from None
        self.stdout.write(f"Re-encrypted {count} secret(s) with the first key.")
