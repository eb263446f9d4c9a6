from django.db import migrations, models

from runs.records.signatures import signatures_recompute


def recompute_signatures(apps, schema_editor):
    """Stored errors and failing scores get the signatures new ones get."""
    signatures_recompute(
        result_model=apps.get_model("runs", "Result"),
        score_model=apps.get_model("runs", "Score"),
    )


class Migration(migrations.Migration):
    dependencies = [
        ("runs", "0004_imports"),
    ]

    operations = [
        migrations.AddField(
            model_name="result",
            name="error_pattern",
            field=models.CharField(blank=True, max_length=300),
        ),
        migrations.AddField(
            model_name="score",
            name="reason_signature",
            field=models.CharField(blank=True, max_length=64),
        ),
        migrations.AlterField(
            model_name="result",
            name="error_signature",
            field=models.CharField(blank=True, max_length=64),
        ),
        migrations.AddIndex(
            model_name="result",
            index=models.Index(
                fields=["run", "error_signature", "item_index", "epoch"],
                name="result_run_signature_idx",
            ),
        ),
        migrations.AddIndex(
            model_name="score",
            index=models.Index(
                condition=models.Q(("reason_signature", ""), _negated=True),
                fields=["result", "scorer", "reason_signature"],
                name="score_failing_idx",
            ),
        ),
        migrations.RunPython(recompute_signatures, migrations.RunPython.noop),
    ]
