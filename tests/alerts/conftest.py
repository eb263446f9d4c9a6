from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.alerts.receivers import deliveries_settled


@pytest.fixture(autouse=True)
def _fast_retries(settings) -> None:
    settings.EVALSITE_ALERT_RETRY_SECONDS = 0
    settings.EVALSITE_ALERT_ATTEMPTS = 3
    settings.EVALSITE_BASE_URL = "https://evals.example.org"


@pytest.fixture(autouse=True)
def _deliveries_end_before_the_database_is_flushed(
    request: pytest.FixtureRequest,
) -> Iterator[None]:
    marker = request.node.get_closest_marker("django_db")
    if marker is None or not marker.kwargs.get("transaction"):
        yield
        return
    request.getfixturevalue("transactional_db")
    yield
    deliveries_settled()
