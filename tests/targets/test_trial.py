"""One test request through a target: outcomes and redaction."""

from __future__ import annotations

from runs.redaction import Redactor
from runs.targets import trial


async def test_a_configuration_that_cannot_build_is_an_error_outcome() -> None:
    outcome = await trial.send_one(
        "python", {"callable": "os.system"}, "hi", seconds=1.0
    )

    assert not outcome.ok
    assert outcome.error_type == "ConfigError"
    assert "EVALSITE_PYTHON_TARGETS" in outcome.error


async def test_a_python_target_answers() -> None:
    outcome = await trial.send_one(
        "python", {"callable": "runs.targets.examples.echo"}, "ping", seconds=1.0
    )

    assert (outcome.ok, outcome.output, outcome.error) == (True, "ping", "")


def test_redacted_replaces_secrets_and_cuts_long_texts() -> None:
    outcome = trial.TargetTry(
        ok=False, output="x" * (trial.MAX_CHARS + 5), error="bad key s3cret"
    )

    clean = trial.redacted(outcome, Redactor([("key", "s3cret")]))

    assert clean.error == "bad key [redacted secret key]"
    assert len(clean.output) == trial.MAX_CHARS
