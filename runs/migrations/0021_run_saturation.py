from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("runs", "0020_retry_passes"),
    ]

    operations = [
        migrations.AddField(
            model_name="run",
            name="call_latency",
            field=models.FloatField(blank=True, null=True),
        ),
        migrations.AddField(
            model_name="runshard",
            name="call_latency",
            field=models.FloatField(blank=True, null=True),
        ),
    ]
