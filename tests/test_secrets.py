"""Project secrets: encrypted at rest, write-only, managed by project admins."""

from __future__ import annotations

import base64
import stat
from pathlib import Path

import pytest
from cryptography.fernet import Fernet
from django.contrib.auth.models import User
from django.core.exceptions import ImproperlyConfigured
from django.db import connection
from django.test import Client
from django.urls import reverse

from evalsite.env import env_fernet_keys, local_secrets_key
from runs.errors import Forbidden, InvalidInput, NotFound
from runs.models import Project, ProjectSecret
from runs.secrets import store

API = "/api/v1"
VALUE = "sk-live-0123456789abcdef"
HOSTS = ["api.openai.com"]


def raw_ciphertexts() -> list[str]:
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT ciphertext FROM {ProjectSecret._meta.db_table}")
        return [row[0] for row in cursor.fetchall()]


def put(
    client: Client,
    project: Project,
    name: str,
    value: str | None = VALUE,
    hosts: list[str] | None = HOSTS,
):
    data = {"value": value, "hosts": hosts}
    return client.put(
        f"{API}/projects/{project.pk}/secrets/{name}",
        data={key: item for key, item in data.items() if item is not None},
        content_type="application/json",
    )


# -- storage -------------------------------------------------------------------------


def test_value_is_never_stored_in_plain_text(alice: User, project: Project) -> None:
    store.secret_set(
        project=project, user=alice, name="OPENAI_API_KEY", value=VALUE, hosts=HOSTS
    )
    (stored,) = raw_ciphertexts()
    assert VALUE not in stored
    assert base64.urlsafe_b64encode(VALUE.encode()).decode() not in stored
    assert store.decrypt(stored, name="OPENAI_API_KEY") == VALUE


def test_another_key_cannot_read_the_values(
    alice: User, project: Project, settings
) -> None:
    store.secret_set(project=project, user=alice, name="KEY", value=VALUE, hosts=HOSTS)
    settings.EVALSITE_SECRETS_KEYS = [Fernet.generate_key().decode()]
    with pytest.raises(store.SecretUnavailable, match="KEY"):
        store.decrypt(raw_ciphertexts()[0], name="KEY")


def test_rotation_re_encrypts_with_the_first_key(
    alice: User, project: Project, settings
) -> None:
    old = settings.EVALSITE_SECRETS_KEYS[0]
    new = Fernet.generate_key().decode()
    store.secret_set(project=project, user=alice, name="KEY", value=VALUE, hosts=HOSTS)
    settings.EVALSITE_SECRETS_KEYS = [new, old]
    assert store.secrets_rotate() == 1
    settings.EVALSITE_SECRETS_KEYS = [new]
    assert store.decrypt(raw_ciphertexts()[0], name="KEY") == VALUE


def test_local_key_file_is_made_once_and_private(tmp_path: Path) -> None:
    first = local_secrets_key(tmp_path)
    path = tmp_path / "secrets_key"
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert local_secrets_key(tmp_path) == first
    Fernet(first.encode())  # a usable key


def test_keys_from_the_environment_are_checked(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    good = Fernet.generate_key().decode()
    monkeypatch.setenv("EVALSITE_SECRETS_KEY", f"{good}, {good}")
    assert env_fernet_keys("EVALSITE_SECRETS_KEY", tmp_path) == [good, good]
    assert not (tmp_path / "secrets_key").exists()
    monkeypatch.setenv("EVALSITE_SECRETS_KEY", f"{good},not-a-key")
    with pytest.raises(ImproperlyConfigured, match="key 2 is not a Fernet key"):
        env_fernet_keys("EVALSITE_SECRETS_KEY", tmp_path)


# -- services --------------------------------------------------------------------------


def test_admin_sets_and_replaces_a_secret(alice: User, project: Project) -> None:
    _, created = store.secret_set(
        project=project, user=alice, name="K", value="a", hosts=HOSTS
    )
    _, again = store.secret_set(
        project=project, user=alice, name="K", value="b", hosts=HOSTS
    )
    assert (created, again) == (True, False)
    assert ProjectSecret.objects.count() == 1
    assert store.decrypt(raw_ciphertexts()[0], name="K") == "b"


@pytest.mark.parametrize("persona", ["bob", "victor"])
def test_members_below_admin_cannot_set_or_delete(
    request: pytest.FixtureRequest, alice: User, project: Project, persona: str
) -> None:
    user = request.getfixturevalue(persona)
    store.secret_set(project=project, user=alice, name="K", value="a", hosts=HOSTS)
    with pytest.raises(Forbidden):
        store.secret_set(
            project=project, user=user, name="K", value="mine", hosts=HOSTS
        )
    with pytest.raises(Forbidden):
        store.secret_delete(project=project, user=user, name="K")
    assert store.decrypt(raw_ciphertexts()[0], name="K") == "a"


def test_outsider_cannot_list(mallory: User, project: Project) -> None:
    with pytest.raises(NotFound):
        store.secret_list(project=project, user=mallory)


@pytest.mark.parametrize(
    ("name", "value", "field"),
    [
        ("1KEY", "v", "name"),
        ("KEY-1", "v", "name"),
        ("", "v", "name"),
        ("K" * 101, "v", "name"),
        ("KEY", "", "value"),
        ("KEY", "   ", "value"),
        ("KEY", "a\r\nX-Injected: 1", "value"),
        ("KEY", "v" * 8193, "value"),
    ],
)
def test_bad_names_and_values_are_refused(
    alice: User, project: Project, name: str, value: str, field: str
) -> None:
    with pytest.raises(InvalidInput) as caught:
        store.secret_set(
            project=project, user=alice, name=name, value=value, hosts=HOSTS
        )
    assert caught.value.field == field
    assert not ProjectSecret.objects.exists()


# -- API -------------------------------------------------------------------------------


def test_api_put_creates_then_replaces_and_never_returns_the_value(
    alice_client: Client, project: Project
) -> None:
    first = put(alice_client, project, "OPENAI_API_KEY")
    second = put(alice_client, project, "OPENAI_API_KEY", "sk-other")
    assert (first.status_code, second.status_code) == (201, 200)
    assert first.json()["name"] == "OPENAI_API_KEY"
    assert first.json()["updated_by"] == "alice"
    assert VALUE not in first.content.decode()
    assert "sk-other" not in second.content.decode()
    assert "ciphertext" not in second.content.decode()


def test_api_lists_names_to_members(
    alice: User, victor_client: Client, project: Project
) -> None:
    store.secret_set(
        project=project, user=alice, name="B_KEY", value=VALUE, hosts=HOSTS
    )
    store.secret_set(
        project=project, user=alice, name="A_KEY", value=VALUE, hosts=HOSTS
    )
    response = victor_client.get(f"{API}/projects/{project.pk}/secrets")
    assert response.status_code == 200
    assert [s["name"] for s in response.json()] == ["A_KEY", "B_KEY"]
    assert VALUE not in response.content.decode()
    assert raw_ciphertexts()[0] not in response.content.decode()


@pytest.mark.parametrize("persona", ["bob_client", "victor_client"])
def test_api_refuses_writes_below_admin(
    request: pytest.FixtureRequest, alice: User, project: Project, persona: str
) -> None:
    client = request.getfixturevalue(persona)
    store.secret_set(project=project, user=alice, name="K", value="a", hosts=HOSTS)
    assert put(client, project, "K").status_code == 403
    deleted = client.delete(f"{API}/projects/{project.pk}/secrets/K")
    assert deleted.status_code == 403
    assert ProjectSecret.objects.count() == 1


def test_api_outsider_gets_404_everywhere(
    alice: User, mallory_client: Client, project: Project
) -> None:
    store.secret_set(project=project, user=alice, name="K", value="a", hosts=HOSTS)
    url = f"{API}/projects/{project.pk}/secrets"
    assert mallory_client.get(url).status_code == 404
    assert put(mallory_client, project, "K").status_code == 404
    assert mallory_client.delete(f"{url}/K").status_code == 404
    assert store.decrypt(raw_ciphertexts()[0], name="K") == "a"


def test_api_delete(alice_client: Client, project: Project) -> None:
    put(alice_client, project, "K")
    url = f"{API}/projects/{project.pk}/secrets/K"
    assert alice_client.delete(url).status_code == 204
    assert not ProjectSecret.objects.exists()
    missing = alice_client.delete(url)
    assert missing.status_code == 404
    assert missing.json()["detail"] == "no secret named 'K' in Research"


def test_api_bad_name_names_the_field(alice_client: Client, project: Project) -> None:
    response = put(alice_client, project, "not-a-name")
    assert response.status_code == 400
    assert response.json()["field"] == "name"


def test_api_anonymous_is_refused(client: Client, project: Project) -> None:
    assert client.get(f"{API}/projects/{project.pk}/secrets").status_code == 401


def test_openapi_documents_every_status(alice_client: Client) -> None:
    schema = alice_client.get(f"{API}/openapi.json").json()
    paths = schema["paths"]
    listing = paths["/api/v1/projects/{project_id}/secrets"]["get"]["responses"]
    item = paths["/api/v1/projects/{project_id}/secrets/{name}"]
    assert {"200", "401", "404"} <= set(listing)
    assert {"200", "201", "400", "401", "403", "404"} <= set(item["put"]["responses"])
    assert {"204", "401", "403", "404"} <= set(item["delete"]["responses"])
    body = item["put"]["requestBody"]["content"]["application/json"]["schema"]
    assert body == {"$ref": "#/components/schemas/SecretIn"}
    assert "value" not in schema["components"]["schemas"]["SecretOut"]["properties"]


# -- page ------------------------------------------------------------------------


def page_url(project: Project) -> str:
    return reverse("runs:project_secrets", args=[project.pk])


def test_admin_adds_a_secret_on_the_page_and_never_sees_it_again(
    alice_client: Client, project: Project
) -> None:
    response = alice_client.post(
        page_url(project),
        {"name": "OPENAI_API_KEY", "value": VALUE, "hosts": "api.openai.com"},
        follow=True,
    )
    page = response.content.decode()
    assert response.redirect_chain[-1][0] == page_url(project)
    assert "Secret OPENAI_API_KEY added." in page
    assert "<code>OPENAI_API_KEY</code>" in page
    assert VALUE not in page
    assert 'type="password"' in page
    assert store.decrypt(raw_ciphertexts()[0], name="OPENAI_API_KEY") == VALUE


def test_a_refused_value_is_not_rendered_back(
    alice_client: Client, project: Project
) -> None:
    response = alice_client.post(page_url(project), {"name": "1bad", "value": VALUE})
    assert response.status_code == 200
    assert VALUE not in response.content.decode()
    assert "letters, digits and underscores" in response.content.decode()
    assert not ProjectSecret.objects.exists()


def test_admin_deletes_a_secret_on_the_page(
    alice: User, alice_client: Client, project: Project
) -> None:
    store.secret_set(project=project, user=alice, name="K", value="a", hosts=HOSTS)
    url = reverse("runs:project_secret_delete", args=[project.pk, "K"])
    assert alice_client.get(url).status_code == 405
    response = alice_client.post(url)
    assert response.status_code == 302
    assert not ProjectSecret.objects.exists()


def test_viewer_sees_names_but_no_form(
    alice: User, victor_client: Client, project: Project
) -> None:
    store.secret_set(project=project, user=alice, name="K", value=VALUE, hosts=HOSTS)
    page = victor_client.get(page_url(project)).content.decode()
    assert "<code>K</code>" in page
    assert "Only project admins" in page
    assert 'id="secret-form"' not in page
    assert VALUE not in page


@pytest.mark.parametrize("persona", ["bob_client", "victor_client"])
def test_page_refuses_writes_below_admin(
    request: pytest.FixtureRequest, alice: User, project: Project, persona: str
) -> None:
    client = request.getfixturevalue(persona)
    store.secret_set(project=project, user=alice, name="K", value="a", hosts=HOSTS)
    posted = client.post(
        page_url(project), {"name": "K", "value": "mine", "hosts": "evil.example"}
    )
    deleted = client.post(reverse("runs:project_secret_delete", args=[project.pk, "K"]))
    assert (posted.status_code, deleted.status_code) == (403, 403)
    assert store.decrypt(raw_ciphertexts()[0], name="K") == "a"


@pytest.mark.parametrize("persona", ["bob_client", "victor_client"])
def test_page_refuses_a_bad_form_below_admin_as_the_members_form_does(
    request: pytest.FixtureRequest, project: Project, persona: str
) -> None:
    client = request.getfixturevalue(persona)
    members = reverse("runs:project_member_add", args=[project.pk])

    posted = client.post(page_url(project), {"name": "1bad", "value": "mine"})

    assert client.post(members, {"user": ""}).status_code == 403
    assert posted.status_code == 403


def test_page_outsider_gets_404(mallory_client: Client, project: Project) -> None:
    assert mallory_client.get(page_url(project)).status_code == 404
    delete = reverse("runs:project_secret_delete", args=[project.pk, "K"])
    assert mallory_client.post(delete).status_code == 404


def test_page_needs_csrf(alice: User, project: Project) -> None:
    client = Client(enforce_csrf_checks=True)
    client.force_login(alice)
    response = client.post(
        page_url(project), {"name": "K", "value": "v", "hosts": "x.example"}
    )
    assert response.status_code == 403
    assert not ProjectSecret.objects.exists()


def test_page_has_no_inline_script_handlers(
    alice_client: Client, alice: User, project: Project
) -> None:
    store.secret_set(project=project, user=alice, name="K", value="v", hosts=HOSTS)
    page = alice_client.get(page_url(project)).content.decode()
    assert " onclick=" not in page and " onsubmit=" not in page


# -- admin site ------------------------------------------------------------------


def test_admin_site_shows_names_only(alice: User, project: Project) -> None:
    secret, _ = store.secret_set(
        project=project, user=alice, name="K", value=VALUE, hosts=HOSTS
    )
    root = User.objects.create_superuser("root", "root@example.org", "pw-root-123")
    client = Client()
    client.force_login(root)
    listing = client.get(reverse("admin:runs_projectsecret_changelist"))
    detail = client.get(reverse("admin:runs_projectsecret_change", args=[secret.pk]))
    add = client.get(reverse("admin:runs_projectsecret_add"))
    assert listing.status_code == detail.status_code == 200
    assert add.status_code == 403
    for response in (listing, detail):
        body = response.content.decode()
        assert "K" in body
        assert VALUE not in body and raw_ciphertexts()[0] not in body
        assert "ciphertext" not in body.lower()


def test_api_empty_value_is_a_400_naming_the_field(
    alice_client: Client, project: Project
) -> None:
    response = put(alice_client, project, "K", "")
    assert response.status_code == 400
    assert response.json()["field"] == "value"


_READ_KEY = """
import sys, time
from pathlib import Path
from evalsite.env import local_key

def slow():  # a key that takes a while to write: the window is wide
    time.sleep(0.05)
    return "k" * 44

print(local_key(Path(sys.argv[1]), slow))
"""


def test_processes_starting_at_once_read_the_same_whole_key(tmp_path) -> None:
    # The file is made by whichever process comes first; the others must never
    # read it before it is written (both test passes start at the same time).
    import subprocess
    import sys

    for attempt in range(3):
        path = str(tmp_path / f"key-{attempt}")
        readers = [
            subprocess.Popen(
                [sys.executable, "-c", _READ_KEY, path],
                cwd=Path(__file__).resolve().parent.parent,
                stdout=subprocess.PIPE,
                text=True,
            )
            for _ in range(8)
        ]
        keys = {reader.communicate(timeout=60)[0].strip() for reader in readers}
        assert keys == {"k" * 44}


# -- hosts -----------------------------------------------------------------------


def stored_hosts() -> list[list[str]]:
    return list(ProjectSecret.objects.values_list("hosts", flat=True))


def test_api_a_new_secret_needs_its_hosts(
    alice_client: Client, project: Project
) -> None:
    response = put(alice_client, project, "K", hosts=None)
    assert response.status_code == 400
    assert response.json()["field"] == "hosts"
    assert not ProjectSecret.objects.exists()


@pytest.mark.parametrize("hosts", [[], ["api.openai.com", "ftp://files.example"]])
def test_api_bad_hosts_are_refused_naming_the_entry(
    alice_client: Client, project: Project, hosts: list[str]
) -> None:
    response = put(alice_client, project, "K", hosts=hosts)
    assert response.status_code == 400
    assert response.json()["field"] == ("hosts[1]" if hosts else "hosts")
    assert not ProjectSecret.objects.exists()


def test_api_hosts_are_changed_without_the_value_and_the_value_without_hosts(
    alice_client: Client, project: Project
) -> None:
    put(alice_client, project, "K")
    rebound = put(alice_client, project, "K", None, ["http://127.0.0.1:8000"])
    assert rebound.status_code == 200
    assert rebound.json()["hosts"] == ["http://127.0.0.1:8000"]
    assert store.decrypt(raw_ciphertexts()[0], name="K") == VALUE
    assert put(alice_client, project, "K", "sk-new", None).status_code == 200
    assert store.decrypt(raw_ciphertexts()[0], name="K") == "sk-new"
    assert stored_hosts() == [["http://127.0.0.1:8000"]]
    empty = alice_client.put(
        f"{API}/projects/{project.pk}/secrets/K", {}, content_type="application/json"
    )
    assert empty.status_code == 400


def test_api_lists_hosts_in_their_canonical_form(
    alice_client: Client, victor_client: Client, project: Project
) -> None:
    put(alice_client, project, "K", hosts=["HTTPS://API.openai.com:443/", "*.x.org"])
    listed = victor_client.get(f"{API}/projects/{project.pk}/secrets").json()
    assert [s["hosts"] for s in listed] == [["api.openai.com", "*.x.org"]]


@pytest.mark.parametrize("persona", ["bob_client", "victor_client"])
def test_api_members_below_admin_cannot_rebind_hosts(
    request: pytest.FixtureRequest, alice: User, project: Project, persona: str
) -> None:
    store.secret_set(project=project, user=alice, name="K", value="a", hosts=HOSTS)
    client = request.getfixturevalue(persona)
    response = put(client, project, "K", None, ["evil.example"])
    assert response.status_code == 403
    assert stored_hosts() == [HOSTS]


def test_admin_binds_and_rebinds_hosts_on_the_page(
    alice_client: Client, project: Project
) -> None:
    alice_client.post(
        page_url(project),
        {"name": "K", "value": VALUE, "hosts": "api.openai.com, http://127.0.0.1:8000"},
    )
    assert stored_hosts() == [["api.openai.com", "http://127.0.0.1:8000"]]
    response = alice_client.post(
        page_url(project), {"name": "K", "value": "", "hosts": "*.x.org"}, follow=True
    )
    page = response.content.decode()
    assert "Secret K updated." in page
    assert "<code>*.x.org</code>" in page
    assert stored_hosts() == [["*.x.org"]]
    assert store.decrypt(raw_ciphertexts()[0], name="K") == VALUE


def test_a_bad_host_on_the_page_is_shown_on_its_field(
    alice_client: Client, project: Project
) -> None:
    response = alice_client.post(
        page_url(project), {"name": "K", "value": VALUE, "hosts": "https://x.org/v1"}
    )
    assert response.status_code == 200
    assert "without a path" in str(response.context["form"].errors["hosts"])
    assert VALUE not in response.content.decode()
    assert not ProjectSecret.objects.exists()


def test_the_page_says_a_secret_bound_nowhere_is_sent_nowhere(
    alice: User, victor_client: Client, project: Project
) -> None:
    store.secret_set(project=project, user=alice, name="K", value="v", hosts=HOSTS)
    ProjectSecret.objects.update(hosts=[])  # as the upgrade leaves an unused one
    page = victor_client.get(page_url(project)).content.decode()
    assert "none: sent nowhere until an admin binds it to a host" in page
