"""Each result's time to result and its failed attempts, stored beside its
attempt log so that a run's summary adds them up without reading the logs;
existing results get them from their logs, a batch at a time."""

from __future__ import annotations

from typing import Any

from django.db import migrations, models
from django.db.backends.base.schema import BaseDatabaseSchemaEditor
from django.db.migrations.state import StateApps

from runs.records.rows import failed_attempts, outcome_round, time_to_result

BATCH = 2000


def fill_attempt_figures(apps: StateApps, schema_editor: BaseDatabaseSchemaEditor) -> None:
    result_model: Any = apps.get_model("runs", "Result")
    last = 0
    while True:
        batch = list(
            result_model.objects.filter(pk__gt=last)
            .order_by("pk")
            .only("pk", "status", "attempts")[:BATCH]
        )
        if not batch:
            return
        for result in batch:
            log = result.attempts if isinstance(result.attempts, list) else []
            result.time_to_result_ms = time_to_result(outcome_round(log, result.status))
            result.failed_attempts = failed_attempts(log)
        result_model.objects.bulk_update(
            batch, ["time_to_result_ms", "failed_attempts"]
        )
        last = batch[-1].pk


class Migration(migrations.Migration):
    dependencies = [
        ("runs", "0022_admin_names"),
    ]

    operations = [
        migrations.AddField(
            model_name="result",
            name="time_to_result_ms",
            field=models.FloatField(blank=True, null=True),
        ),
        migrations.AddField(
            model_name="result",
            name="failed_attempts",
            field=models.PositiveIntegerField(default=0),
        ),
        migrations.RunPython(fill_attempt_figures, migrations.RunPython.noop),
    ]
