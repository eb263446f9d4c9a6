"""The fake model server's own routes."""

from __future__ import annotations

import httpx

from runs.testing.fake_openai import FakeOpenAIServer


def test_stats_route_counts_the_calls_received(fake_openai: FakeOpenAIServer) -> None:
    with httpx.Client(base_url=fake_openai.base_url) as client:
        for question in ("What is 1 + 2?", "What is 3 + 4?"):
            message = {"role": "user", "content": question}
            answer = client.post(
                "/chat/completions", json={"model": "m", "messages": [message]}
            )
            assert answer.status_code == 200
        stats = client.get("/stats")

    assert stats.status_code == 200
    assert stats.json() == {
        "requests": 2,
        "disconnects": 0,
        "in_flight": 0,
        "max_in_flight": 1,
    }
