"""The outbound network policy: rules, the connect-time resolver, target URLs."""

from __future__ import annotations

import ipaddress
import socket

import aiohttp
import httpx
import pytest
from aiohttp.abc import AbstractResolver, ResolveResult
from django.core.exceptions import ImproperlyConfigured

from evalsite.env import env_network_rules
from runs.calls import netpolicy
from runs.calls.netpolicy import (
    NetworkPolicy,
    PolicyRefused,
    PolicyResolver,
    clean_target_url,
    endpoint_url,
)
from runs.calls.sessions import policy_session
from runs.errors import ConfigError
from runs.targets import clean_target_config
from runs.targets.openai_chat import OpenAIChatTarget

DEFAULT = NetworkPolicy.parse(netpolicy.DEFAULT_ALLOW, [])
EVERYTHING = NetworkPolicy.parse(["*", "0.0.0.0/0", "::/0", "private"], [])


def ip(text: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address:
    return ipaddress.ip_address(text)


class FakeDNS(AbstractResolver):
    """Answers from a table, as a DNS server under an attacker's control would."""

    def __init__(self, table: dict[str, list[str]]) -> None:
        self.table = table
        self.asked: list[str] = []

    async def resolve(
        self, host: str, port: int = 0, family: socket.AddressFamily = socket.AF_INET
    ) -> list[ResolveResult]:
        self.asked.append(host)
        return [
            {
                "hostname": host,
                "host": address,
                "port": port,
                "family": socket.AF_INET6 if ":" in address else socket.AF_INET,
                "proto": 0,
                "flags": socket.AI_NUMERICHOST,
            }
            for address in self.table[host]
        ]

    async def close(self) -> None:
        return None


# -- rules ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("address", "permitted"),
    [
        ("127.0.0.1", False),
        ("::1", False),
        ("127.0.0.2", False),
        ("93.184.216.34", True),
        ("2606:2800:220:1:248:1893:25c8:1946", True),
        ("10.0.0.5", False),
        ("192.168.1.10", False),
        ("172.16.0.1", False),
        ("fd12:3456::1", False),
        ("100.64.0.1", False),
    ],
)
def test_default_allows_public_addresses_only(address: str, permitted: bool) -> None:
    assert DEFAULT.permits("model.example", ip(address)) is permitted


@pytest.mark.parametrize(
    ("host", "address"),
    [
        ("169.254.169.254", None),
        ("::ffff:169.254.169.254", None),
        ("metadata.google.internal", None),
        ("metadata.google.internal.", None),
        ("innocent.example", "169.254.169.254"),
        ("innocent.example", "169.254.10.1"),
        ("innocent.example", "fe80::1"),
        ("innocent.example", "fd00:ec2::254"),
        ("innocent.example", "100.100.100.200"),
        ("innocent.example", "0.0.0.0"),
    ],
)
def test_link_local_and_metadata_are_refused_whatever_allow_says(
    host: str, address: str | None
) -> None:
    assert not EVERYTHING.permits(host, ip(address) if address else None)


def test_deny_wins_over_allow() -> None:
    policy = NetworkPolicy.parse(["loopback", "public"], ["127.0.0.1", "*.bad.org"])
    assert not policy.permits("localhost", ip("127.0.0.1"))
    assert policy.permits("localhost", ip("127.0.0.2"))
    assert not policy.permits("api.bad.org", ip("93.184.216.34"))


def test_a_name_or_suffix_in_allow_permits_its_private_addresses() -> None:
    policy = NetworkPolicy.parse(["gpu.internal", "*.corp.example"], [])
    assert policy.permits("gpu.internal", ip("10.0.0.7"))
    assert policy.permits("llm.corp.example", ip("10.0.0.8"))
    assert not policy.permits("corp.example", ip("10.0.0.8"))
    assert not policy.permits("elsewhere.example", ip("93.184.216.34"))


def test_an_allow_list_without_public_locks_down_to_its_names() -> None:
    policy = NetworkPolicy.parse(["api.openai.com"], [])
    assert policy.permits("api.openai.com", ip("93.184.216.34"))
    assert not policy.permits("127.0.0.1", None)
    assert not policy.permits("attacker.example", ip("93.184.216.34"))


@pytest.mark.parametrize("rule", ["10.0.0.1/33", "not a host", "10.0.0.0/8x", "127.1"])
def test_a_bad_rule_is_an_improper_configuration(
    monkeypatch: pytest.MonkeyPatch, rule: str
) -> None:
    monkeypatch.setenv("EVALSITE_TARGET_DENY", f"10.0.0.0/8,{rule}")
    with pytest.raises(ImproperlyConfigured, match="EVALSITE_TARGET_DENY"):
        env_network_rules("EVALSITE_TARGET_DENY", ())


def test_rules_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("EVALSITE_TARGET_ALLOW", " api.openai.com , 10.1.0.0/16 ,")
    assert env_network_rules("EVALSITE_TARGET_ALLOW", ("loopback",)) == [
        "api.openai.com",
        "10.1.0.0/16",
    ]
    monkeypatch.delenv("EVALSITE_TARGET_ALLOW")
    assert env_network_rules("EVALSITE_TARGET_ALLOW", ("loopback",)) == ["loopback"]


# -- connect time -------------------------------------------------------------------


async def test_resolver_keeps_only_the_permitted_addresses() -> None:
    dns = FakeDNS(
        {"mixed.example": ["10.0.0.5", "127.0.0.1", "93.184.216.34", "169.254.169.254"]}
    )
    resolver = PolicyResolver(DEFAULT, inner=dns)
    results = await resolver.resolve("mixed.example", 443)
    assert [r["host"] for r in results] == ["93.184.216.34"]


async def test_resolver_refuses_a_name_that_resolves_to_metadata() -> None:
    dns = FakeDNS({"rebind.example": ["169.254.169.254"]})
    with pytest.raises(PolicyRefused, match=r"refuses connections to rebind\.example"):
        await PolicyResolver(EVERYTHING, inner=dns).resolve("rebind.example", 80)


async def test_resolver_refuses_a_denied_name_without_asking_dns() -> None:
    dns = FakeDNS({})
    policy = NetworkPolicy.parse(["public"], ["*.internal.example"])
    with pytest.raises(PolicyRefused):
        await PolicyResolver(policy, inner=dns).resolve("db.internal.example", 80)
    assert dns.asked == []


async def test_a_literal_metadata_address_is_refused_before_any_connection() -> None:
    async with policy_session(EVERYTHING) as session:
        with pytest.raises(PolicyRefused, match=r"169\.254\.169\.254"):
            await session.get("http://169.254.169.254/latest/meta-data/")


async def test_a_literal_denied_address_is_refused_at_connect_time(
    fake_openai,
) -> None:
    policy = NetworkPolicy.parse(["loopback", "public"], ["127.0.0.1"])
    async with policy_session(policy) as session:
        with pytest.raises(PolicyRefused):
            await session.post(f"{fake_openai.base_url}/chat/completions", json={})
    assert fake_openai.stats.requests == 0


async def test_dns_rebinding_to_a_refused_address_cannot_pass(
    monkeypatch: pytest.MonkeyPatch, settings, fake_openai
) -> None:
    """A name that passes when the target is saved is checked again when used."""
    dns = FakeDNS({"model.example": ["127.0.0.1"]})
    monkeypatch.setattr(netpolicy, "DefaultResolver", lambda: dns)
    base_url = f"http://model.example:{fake_openai.port}/v1"
    config = clean_target_config("openai_chat", {"base_url": base_url, "model": "m"})
    target = OpenAIChatTarget.from_config(config)
    try:
        item = _item("1+1")
        assert (await target.generate(item)).output
        # The name now points at the metadata service (and the cache is cold).
        dns.table["model.example"] = ["169.254.169.254"]
        await target.aclose()
        target = OpenAIChatTarget.from_config(config)
        with pytest.raises(Exception) as caught:
            await target.generate(item)
    finally:
        await target.aclose()
    error = caught.value
    assert (error.error_type, error.kind) == ("NetworkPolicy", "permanent")
    assert str(error) == (
        "the network policy refuses connections to model.example: "
        "a link-local or cloud metadata address is never allowed"
    )
    assert fake_openai.stats.requests == 1


def _item(text: str):
    from runs.targets import TargetInput

    return TargetInput(index=0, external_id="1", input=text)


# -- target URLs --------------------------------------------------------------------


@pytest.mark.parametrize(
    ("url", "message"),
    [
        ("http://127.0.0.1:9/v1?", "query"),
        ("http://127.0.0.1:9/v1?x=1", "query"),
        ("http://127.0.0.1:9/v1#", "fragment"),
        ("http://user:pw@127.0.0.1:9/v1", "user name or password"),
        ("http://@127.0.0.1:9/v1", "user name or password"),
        ("ftp://127.0.0.1/v1", "http:// or https://"),
        ("file:///etc/passwd", "http:// or https://"),
        ("http://169.254.169.254/latest", "network policy refuses"),
        ("http://[fe80::1]/v1", "network policy refuses"),
        ("http://metadata.google.internal/v1", "network policy refuses"),
        ("http://10.0.0.5/v1", "network policy refuses"),
        ("http://2130706433/v1", "canonical"),
        ("http://127.1/v1", "canonical"),
        ("http://evil.example\\@good.example/v1", "backslash"),
    ],
)
def test_target_url_is_refused_when_saved(url: str, message: str) -> None:
    with pytest.raises(ConfigError, match=message) as caught:
        clean_target_config("openai_chat", {"base_url": url, "model": "m"})
    assert caught.value.field == "config.base_url"


def test_private_address_is_accepted_when_the_operator_allows_it(settings) -> None:
    settings.EVALSITE_TARGET_ALLOW = ["loopback", "public", "10.0.0.0/8"]
    config = clean_target_config(
        "openai_chat", {"base_url": "http://10.0.0.5:8000/v1", "model": "m"}
    )
    assert config["base_url"] == "http://10.0.0.5:8000/v1"


@pytest.mark.parametrize(
    ("base_url", "expected"),
    [
        ("http://h/v1", "http://h/v1/chat/completions"),
        ("http://h/v1/", "http://h/v1/chat/completions"),
        ("http://h", "http://h/chat/completions"),
        ("http://h/v1%3F", "http://h/v1%3F/chat/completions"),
        ("http://h/a%23b/v1", "http://h/a%23b/v1/chat/completions"),
    ],
)
def test_endpoint_is_appended_as_a_path(base_url: str, expected: str) -> None:
    url = endpoint_url(base_url, "chat/completions")
    assert str(url) == expected
    assert (url.query, url.fragment) == (b"", "")


def test_clean_target_url_refuses_what_a_user_might_paste() -> None:
    assert clean_target_url("https://api.openai.com/v1") == "https://api.openai.com/v1"
    with pytest.raises(ValueError, match="query"):
        clean_target_url("https://api.openai.com/v1?api-version=1")


async def test_a_refused_connection_is_a_permanent_target_error(
    settings, fake_openai
) -> None:
    config = clean_target_config(
        "openai_chat", {"base_url": fake_openai.base_url, "model": "m"}
    )
    settings.EVALSITE_TARGET_DENY = ["127.0.0.0/8"]
    # Built as for a run whose configuration passed before the rule was added.
    target = OpenAIChatTarget(OpenAIChatTarget.Params.model_construct(**config))
    try:
        with pytest.raises(Exception) as caught:
            await target.generate(_item("1+1"))
    finally:
        await target.aclose()
    assert caught.value.error_type == "NetworkPolicy"
    assert caught.value.kind == "permanent"
    assert "127.0.0.1" in str(caught.value)
    assert fake_openai.stats.requests == 0


async def test_policy_session_ignores_proxy_variables(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("HTTP_PROXY", "http://10.9.9.9:3128")
    async with policy_session(DEFAULT) as session:
        assert session.trust_env is False
        assert isinstance(session.connector, aiohttp.TCPConnector)


def test_httpx_url_of_an_ipv6_literal_is_checked_unbracketed() -> None:
    assert httpx.URL("http://[::1]:8/v1").host == "::1"
    assert NetworkPolicy.parse(["public", "loopback"], []).permits("[::1]", None)
    assert not DEFAULT.permits("[::1]", None)


def test_names_are_judged_in_the_ascii_form_that_is_resolved() -> None:
    policy = NetworkPolicy.parse(["xn--bcher-kva.example"], [])
    url = clean_target_url("http://bücher.example/v1", policy=policy)
    assert url == "http://xn--bcher-kva.example/v1"
    denied = NetworkPolicy.parse(["public"], ["*.example"])
    with pytest.raises(ValueError, match="refuses"):
        clean_target_url("http://bücher.example/v1", policy=denied)
