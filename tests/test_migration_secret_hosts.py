"""Migration 0019 binds each existing secret to the hosts it is sent to today."""

from __future__ import annotations

from django.db.migrations.executor import MigrationExecutor

from runs.secrets.destinations import permits
from runs.secrets.store import encrypt

BEFORE = [("runs", "0018_result_indexes")]
AFTER = [("runs", "0019_secret_hosts")]


def test_existing_secrets_are_bound_to_the_hosts_their_project_uses(
    migrator: MigrationExecutor,
) -> None:
    migrator.migrate(BEFORE)
    apps = migrator.loader.project_state(BEFORE).apps
    Project = apps.get_model("runs", "Project")
    ProjectSecret = apps.get_model("runs", "ProjectSecret")
    Target = apps.get_model("runs", "Target")
    Dataset = apps.get_model("runs", "Dataset")
    Run = apps.get_model("runs", "Run")
    project = Project.objects.create(name="p")
    other = Project.objects.create(name="other")
    for name in ("CHAT", "AGENT", "JUDGE", "UNUSED"):
        ProjectSecret.objects.create(
            project=project, name=name, ciphertext=encrypt("v")
        )
    ProjectSecret.objects.create(project=other, name="CHAT", ciphertext=encrypt("v"))
    chat = {"base_url": "https://api.openai.com/v1", "api_key_secret": "CHAT"}
    Target.objects.create(project=project, name="a", kind="openai_chat", config=chat)
    Target.objects.create(
        project=project,
        name="b",
        kind="http",
        config={"url": "http://127.0.0.1:8080/agent", "auth_secret": "AGENT"},
    )
    Target.objects.create(
        project=project,
        name="c",
        kind="chain",
        config={
            "run": 1,
            "target": {
                "kind": "openai_chat",
                "config": {
                    "base_url": "https://[::1]:8443/v1",
                    "api_key_secret": "CHAT",
                },
            },
        },
    )
    dataset = Dataset.objects.create(project=project, name="d", content_hash="h")
    judge = {"base_url": "https://judge.example/v1", "api_key_secret": "JUDGE"}
    Run.objects.create(
        project=project,
        dataset=dataset,
        target_kind="scorer",
        target_config={"scorer_kind": "llm_judge", "params": chat},
        scorers=[{"name": "j", "kind": "llm_judge", "params": judge}],
    )

    migrator.loader.build_graph()
    migrator.migrate(AFTER)

    apps = migrator.loader.project_state(AFTER).apps
    hosts = {
        (secret.project_id, secret.name): secret.hosts
        for secret in apps.get_model("runs", "ProjectSecret").objects.all()
    }
    assert hosts == {
        (project.pk, "CHAT"): ["api.openai.com", "https://[::1]:8443"],
        (project.pk, "AGENT"): ["http://127.0.0.1:8080"],
        (project.pk, "JUDGE"): ["judge.example"],
        (project.pk, "UNUSED"): [],
        (other.pk, "CHAT"): [],
    }
    # Each target keeps working: the pattern permits the URL it was made from.
    assert permits(hosts[(project.pk, "AGENT")], "http://127.0.0.1:8080/agent")
    assert permits(hosts[(project.pk, "CHAT")], "https://[::1]:8443/v1")
    assert not permits(hosts[(project.pk, "AGENT")], "http://127.0.0.1:8081/agent")
