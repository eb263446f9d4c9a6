"""The shipped network policy keeps targets off this machine's loopback; the
README's one line lets a local model server back in.

The suite itself allows loopback (tests/conftest.py): these tests run
``evalrun`` in processes whose environment names no policy, as a fresh
installation's has none.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from runs.testing.fake_openai import FakeOpenAIServer
from tests.processes import ROOT, env_for

README = (ROOT / "README.md").read_text()
# What the README tells an operator with a model server on this machine to set.
README_LOOPBACK = "public,loopback"


def evalrun(
    data_dir: Path, server: FakeOpenAIServer, tmp_path: Path, **env: str
) -> subprocess.CompletedProcess[str]:
    dataset = tmp_path / "items.jsonl"
    dataset.write_text(
        "".join(
            json.dumps({"input": f"What is {i} + {i}?", "expected": str(2 * i)}) + "\n"
            for i in range(3)
        )
    )
    process_env = env_for(data_dir)
    process_env.pop("EVALSITE_TARGET_ALLOW", None)
    process_env.update(env)
    return subprocess.run(
        [
            sys.executable,
            "manage.py",
            "evalrun",
            str(dataset),
            "--target",
            "openai_chat",
            "--base-url",
            server.base_url,
            "--model",
            "fake",
            "--scorer",
            "exact_match",
            "--json",
        ],
        cwd=ROOT,
        env=process_env,
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_the_shipped_policy_refuses_a_server_on_loopback(
    data_dir: Path, fake_openai: FakeOpenAIServer, tmp_path: Path
) -> None:
    done = evalrun(data_dir, fake_openai, tmp_path)

    assert done.returncode != 0
    assert "network policy refuses connections to 127.0.0.1" in done.stderr
    assert fake_openai.stats.requests == 0


def test_adding_loopback_as_the_readme_says_reaches_a_local_model_server(
    data_dir: Path, fake_openai: FakeOpenAIServer, tmp_path: Path
) -> None:
    assert f'EVALSITE_TARGET_ALLOW="{README_LOOPBACK}"' in README

    done = evalrun(
        data_dir, fake_openai, tmp_path, EVALSITE_TARGET_ALLOW=README_LOOPBACK
    )

    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["succeeded"] == 3
    assert fake_openai.stats.requests == 3
