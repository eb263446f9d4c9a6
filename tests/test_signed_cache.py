"""What goes into a Redis cache is signed JSON; nothing else comes out of one."""

from __future__ import annotations

import json
import os
import pickle
import subprocess
import sys
from pathlib import Path

import pytest
from django.core import signing

from evalsite.signed_cache import (
    SessionCacheSerializer,
    SignedJSONSerializer,
    hashed_key,
)
from tests.processes import ROOT

SESSION = {
    "_auth_user_id": "7",
    "_auth_user_backend": "runs.projects.auth_backend.UserBackend",
    "_auth_user_hash": "c0ffee",
    "_session_expiry": 1209600,
    "note": "ünïcode ✓",
}


class Planted:
    """A pickle that, once loaded, leaves a file behind (as a command would)."""

    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self) -> tuple[object, tuple[str, str]]:
        return (open, (str(self.marker), "w"))


def test_a_value_comes_back_as_it_went_in() -> None:
    serializer = SessionCacheSerializer()
    stored = serializer.dumps(SESSION)

    assert serializer.loads(stored) == SESSION
    assert not stored.startswith(b"\x80")  # not a pickle


def test_a_pickle_is_never_loaded(tmp_path: Path) -> None:
    marker = tmp_path / "ran"

    assert SessionCacheSerializer().loads(pickle.dumps(Planted(marker))) is None
    assert not marker.exists()


@pytest.mark.parametrize(
    "stored",
    [
        b"1",  # a bare integer, as Django's own serializer leaves them
        json.dumps(SESSION).encode(),  # JSON, unsigned
        b"\xff\xfe not ascii",
        b"",
    ],
)
def test_anything_unsigned_reads_as_a_miss(stored: bytes) -> None:
    assert SessionCacheSerializer().loads(stored) is None


def test_an_altered_value_reads_as_a_miss() -> None:
    serializer = SessionCacheSerializer()
    payload, signature = serializer.dumps(SESSION).rsplit(b":", 1)
    forged = signing.b64_encode(json.dumps({**SESSION, "_auth_user_id": "1"}).encode())

    assert serializer.loads(forged + b":" + signature) is None
    assert serializer.loads(payload + b":" + signature[:-2] + b"AA") is None


def test_a_value_signed_for_another_purpose_or_key_reads_as_a_miss(settings) -> None:
    other_purpose = SignedJSONSerializer().dumps(SESSION)
    settings.SECRET_KEY = "another installation's key"
    other_key = SessionCacheSerializer().dumps(SESSION)
    settings.SECRET_KEY = "this installation's key"

    assert SessionCacheSerializer().loads(other_purpose) is None
    assert SessionCacheSerializer().loads(other_key) is None


def test_a_key_is_stored_under_a_name_that_does_not_show_it(settings) -> None:
    session_key = "k" * 32
    name = hashed_key(f"sessions{session_key}", "evalsite-session", 1)

    assert name.startswith("evalsite-session:1:")
    assert session_key not in name
    assert name == hashed_key(f"sessions{session_key}", "evalsite-session", 1)
    assert name != hashed_key(f"sessions{session_key}", "evalsite-session", 2)
    settings.SECRET_KEY = "another installation's key"
    assert name != hashed_key(f"sessions{session_key}", "evalsite-session", 1)


def test_every_redis_cache_is_signed_json_under_hashed_names(tmp_path: Path) -> None:
    """Whatever caches the settings put in Redis, none of them pickles."""
    env = {k: v for k, v in os.environ.items() if k != "DJANGO_SETTINGS_MODULE"}
    env.update(
        DJANGO_SETTINGS_MODULE="evalsite.settings",
        EVALSITE_DATA_DIR=str(tmp_path),
        REDIS_URL="redis://127.0.0.1:6379/0",  # read, never connected to
    )
    done = subprocess.run(
        [
            sys.executable,
            "-c",
            "import json; from django.conf import settings; "
            "print(json.dumps(settings.CACHES, default=str))",
        ],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    caches = json.loads(done.stdout)
    redis = {
        alias: config
        for alias, config in caches.items()
        if "redis" in config["BACKEND"].lower()
    }

    assert "sessions" in redis
    for config in redis.values():
        assert config["KEY_FUNCTION"] == "evalsite.signed_cache.hashed_key"
        path = config["OPTIONS"]["serializer"]
        module, _, name = path.rpartition(".")
        serializer = getattr(__import__(module, fromlist=[name]), name)
        assert issubclass(serializer, SignedJSONSerializer)
