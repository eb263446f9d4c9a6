from django.db import migrations, models

from runs.analysis.signatures import signatures_recompute


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
                fields=["run", "error_signature"], name="runs_result_run_id_270de2_idx"
            ),
        ),
        migrations.RunPython(recompute_signatures, migrations.RunPython.noop),
    ]
