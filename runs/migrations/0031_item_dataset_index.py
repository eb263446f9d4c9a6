import django.db.models.deletion
from django.db import migrations, models

# The index Django made for the foreign key (its name is the same on SQLite
# and PostgreSQL): dropped alone, without SQLite rebuilding the items table.
INDEX = "runs_item_dataset_id_c107e57d"


class Migration(migrations.Migration):
    dependencies = [
        ("runs", "0030_review_queues"),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            database_operations=[
                migrations.RunSQL(
                    f"DROP INDEX IF EXISTS {INDEX}",
                    reverse_sql=f'CREATE INDEX {INDEX} ON "runs_item" ("dataset_id")',
                ),
            ],
            state_operations=[
                migrations.AlterField(
                    model_name="item",
                    name="dataset",
                    field=models.ForeignKey(
                        db_index=False,
                        on_delete=django.db.models.deletion.CASCADE,
                        related_name="items",
                        to="runs.dataset",
                    ),
                ),
            ],
        ),
    ]
