"""Host patterns of secrets: https on its port unless said otherwise."""

from __future__ import annotations

import pytest

from runs.secrets.destinations import Destination, HostPattern, clean_patterns, permits


@pytest.mark.parametrize(
    ("text", "canonical"),
    [
        ("api.openai.com", "api.openai.com"),
        ("API.OpenAI.com.", "api.openai.com"),
        ("https://api.openai.com", "api.openai.com"),
        ("https://api.openai.com:443/", "api.openai.com"),
        ("https://api.openai.com:8443", "https://api.openai.com:8443"),
        ("http://127.0.0.1", "http://127.0.0.1"),
        ("http://127.0.0.1:80", "http://127.0.0.1"),
        ("http://127.0.0.1:8080", "http://127.0.0.1:8080"),
        ("*.openai.azure.com", "*.openai.azure.com"),
        ("::1", "[::1]"),
        ("http://[0::1]:8000", "http://[::1]:8000"),
    ],
)
def test_patterns_are_written_in_one_form(text: str, canonical: str) -> None:
    assert str(HostPattern.parse(text)) == canonical


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("", "empty"),
        ("*", "every host"),
        ("ftp://files.example", "scheme must be https or http"),
        ("https://api.openai.com/v1", "without a path"),
        ("user@api.openai.com", "without spaces, credentials"),
        ("api.openai.com:0", "port must be 1 to 65535"),
        ("api.openai.com:70000", "port must be 1 to 65535"),
        ("[not-an-address]", "not an IPv6 address"),
        ("127.1", "not a host name"),
        ("bücher.example", "ASCII"),
    ],
)
def test_bad_patterns_say_what_is_wrong(text: str, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        HostPattern.parse(text)


@pytest.mark.parametrize(
    ("patterns", "url", "permitted"),
    [
        (["api.openai.com"], "https://api.openai.com/v1", True),
        (["api.openai.com"], "https://API.openai.com./v1", True),
        (["api.openai.com"], "http://api.openai.com/v1", False),
        (["api.openai.com"], "https://api.openai.com:8443/v1", False),
        (["api.openai.com"], "https://api.openai.com.evil.example/v1", False),
        (["http://api.openai.com"], "http://api.openai.com/v1", True),
        (["http://api.openai.com"], "https://api.openai.com/v1", False),
        (["*.azure.com"], "https://x.openai.azure.com/openai", True),
        (["*.azure.com"], "https://azure.com/openai", False),
        (["*.azure.com"], "https://evilazure.com/openai", False),
        (["http://127.0.0.1:8000"], "http://127.0.0.1:8000/v1", True),
        (["http://127.0.0.1:8000"], "http://127.0.0.1:8001/v1", False),
        (["http://127.0.0.1:8000"], "http://localhost:8000/v1", False),
        (["http://[::1]:8000"], "http://[0:0::1]:8000/v1", True),
        (["api.openai.com"], "", False),
        ([], "https://api.openai.com/v1", False),
    ],
)
def test_a_url_is_permitted_by_scheme_host_and_port(
    patterns: list[str], url: str, permitted: bool
) -> None:
    assert permits(patterns, url) is permitted


def test_clean_patterns_drops_duplicates_in_their_canonical_form() -> None:
    assert clean_patterns(
        ["https://a.example:443", "a.example", "http://a.example"]
    ) == [
        "a.example",
        "http://a.example",
    ]


def test_a_destination_is_shown_with_its_scheme() -> None:
    assert str(Destination.of("https://api.openai.com/v1")) == "https://api.openai.com"
    assert str(Destination.of("http://[::1]:8/v1")) == "http://[::1]:8"
    assert Destination.of("ftp://x.example/") is None
