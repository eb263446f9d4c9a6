"""evalrun names a project secret, or an allowed variable, never any variable."""

from __future__ import annotations

from runs.testing.fake_openai import FakeOpenAIServer
from tests.test_evalrun_command import evalrun_args, run_cli, write_items


def test_evalrun_names_a_missing_secret(
    data_dir, fake_openai: FakeOpenAIServer, tmp_path
):
    dataset = write_items(tmp_path / "a.jsonl", 2)
    done = run_cli(
        evalrun_args(dataset, fake_openai, "--api-key-secret", "NOPE"), data_dir
    )
    assert done.returncode == 2
    assert "project secret NOPE may not be sent to" in done.stderr
    assert fake_openai.stats.requests == 0


def test_evalrun_refuses_an_unlisted_variable(
    data_dir, fake_openai: FakeOpenAIServer, tmp_path, monkeypatch
):
    monkeypatch.setenv("EVALSITE_TEST_CLI_SECRET", "do-not-send")
    dataset = write_items(tmp_path / "a.jsonl", 2)
    args = evalrun_args(
        dataset, fake_openai, "--api-key-env", "EVALSITE_TEST_CLI_SECRET"
    )
    done = run_cli(args, data_dir)
    assert done.returncode == 2
    assert "not a variable the operator allows" in done.stderr
    assert fake_openai.stats.authorization == set()
    assert "do-not-send" not in done.stderr + done.stdout
