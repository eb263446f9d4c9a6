"""IPv6 addresses that reach an IPv4 host through a translator are judged as
that host: NAT64, IPv4-translated, -compatible and -mapped, 6to4."""

from __future__ import annotations

import ipaddress

import pytest

from runs.calls.netpolicy import (
    NetworkPolicy,
    PolicyRefused,
    PolicyResolver,
)
from runs.calls.sessions import policy_session
from runs.errors import ConfigError
from runs.targets import clean_target_config
from tests.test_netpolicy import FakeDNS

# The suite's policy: loopback (its fake servers) and public addresses.
SUITE = NetworkPolicy.parse(["loopback", "public"], [])
EVERYTHING = NetworkPolicy.parse(["*", "0.0.0.0/0", "::/0", "private"], [])
PRIVATE_ONLY = NetworkPolicy.parse(["private"], [])

# Each reaches 169.254.169.254, the metadata service.
METADATA = [
    "64:ff9b::a9fe:a9fe",  # NAT64, well-known prefix
    "64:ff9b:1:a9fe:a9:fe00::",  # local-use NAT64, /48 layout
    "64:ff9b:1:a9:fe:a9fe::",  # local-use NAT64, /56 layout
    "64:ff9b:1:0:a9:fea9:fe00:0",  # local-use NAT64, /64 layout
    "64:ff9b:1::a9fe:a9fe",  # local-use NAT64, /96 layout
    "::ffff:0:a9fe:a9fe",  # IPv4-translated
    "::a9fe:a9fe",  # IPv4-compatible (::169.254.169.254)
    "::ffff:a9fe:a9fe",  # IPv4-mapped
    "2002:a9fe:a9fe::",  # 6to4
    "2002:a9fe:a9fe:1::5",
]


@pytest.mark.parametrize("address", METADATA)
def test_a_translated_metadata_address_is_refused_from_dns(address: str) -> None:
    assert not EVERYTHING.permits("innocent.example", ipaddress.ip_address(address))


@pytest.mark.parametrize("address", METADATA)
def test_a_translated_metadata_address_is_refused_as_a_literal(address: str) -> None:
    assert not EVERYTHING.permits(f"[{address}]", None)


@pytest.mark.parametrize(
    "address", ["64:ff9b::a00:1", "::ffff:0:a00:1", "::a00:1", "2002:a00:1::"]
)
def test_a_translated_private_address_is_private(address: str) -> None:
    # 10.0.0.1 inside: refused by the default policy, allowed by "private".
    assert not SUITE.permits("model.example", ipaddress.ip_address(address))
    assert PRIVATE_ONLY.permits("model.example", ipaddress.ip_address(address))


@pytest.mark.parametrize("address", ["64:ff9b::808:808", "2002:808:808::1"])
def test_a_translated_public_address_is_public(address: str) -> None:
    assert SUITE.permits("model.example", ipaddress.ip_address(address))
    assert not PRIVATE_ONLY.permits("model.example", ipaddress.ip_address(address))


def test_loopback_and_a_valid_local_nat64_address_stay_usable() -> None:
    assert SUITE.permits("localhost", ipaddress.ip_address("::1"))
    assert PRIVATE_ONLY.permits("gw.example", ipaddress.ip_address("64:ff9b:1::a00:1"))


async def test_resolver_refuses_a_name_answered_with_nat64_metadata() -> None:
    dns = FakeDNS({"rebind.example": ["64:ff9b::a9fe:a9fe", "::a9fe:a9fe"]})
    with pytest.raises(PolicyRefused, match=r"rebind\.example"):
        await PolicyResolver(EVERYTHING, inner=dns).resolve("rebind.example", 80)


async def test_a_literal_nat64_metadata_url_is_refused_before_connecting() -> None:
    async with policy_session(EVERYTHING) as session:
        with pytest.raises(PolicyRefused):
            await session.get("http://[64:ff9b::a9fe:a9fe]/latest/meta-data/")


@pytest.mark.parametrize(
    "url", ["http://[::ffff:0:a9fe:a9fe]/v1", "http://[64:ff9b::a9fe:a9fe]/v1"]
)
def test_a_translated_metadata_url_is_refused_when_saved(url: str) -> None:
    with pytest.raises(ConfigError, match="network policy refuses") as caught:
        clean_target_config("openai_chat", {"base_url": url, "model": "m"})
    assert caught.value.field == "config.base_url"
