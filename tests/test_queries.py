"""A count of queries read after a later request emptied the connection's log
fails, where it read another log (most often nothing) and passed."""

from __future__ import annotations

import pytest
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext

pytestmark = pytest.mark.django_db


def test_a_capture_read_after_the_next_request_fails(alice_client: Client) -> None:
    with CaptureQueriesContext(connection) as captured:
        alice_client.get("/")
    alice_client.get("/")  # its request_started empties the connection's log

    with pytest.raises(AssertionError, match="before the next request"):
        len(captured)
    with pytest.raises(AssertionError, match="before the next request"):
        list(captured)


def test_a_capture_read_before_the_next_request_keeps_its_queries(
    alice_client: Client,
) -> None:
    with CaptureQueriesContext(connection) as captured:
        alice_client.get("/")
    read = [query["sql"] for query in captured.captured_queries]
    alice_client.get("/")

    assert read
    assert any('"auth_user"' in sql for sql in read)


def test_requests_inside_a_later_capture_leave_an_earlier_one_as_it_was(
    alice_client: Client,
) -> None:
    alice_client.get("/")  # once-per-process reads, caches filled
    with CaptureQueriesContext(connection) as one:
        alice_client.get("/")
    # Inside a capture a request does not empty the log.
    with CaptureQueriesContext(connection) as two:
        alice_client.get("/")
        alice_client.get("/")

    assert 0 < len(one) < len(two)
