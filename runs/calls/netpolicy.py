"""The operator's policy for where targets and judges may connect.

``EVALSITE_TARGET_ALLOW`` and ``EVALSITE_TARGET_DENY`` list rules, comma
separated: a network in CIDR notation (``10.1.0.0/16``, ``fd12::/48``), a
single address, a host name (``api.openai.com``), a ``*.suffix`` wildcard that
matches every name below the suffix (not the suffix itself), ``*`` for every
host name, or one of the words ``loopback``, ``private`` and ``public`` (the
address classes of Python's ``ipaddress``). The default allows ``public`` only:
a model server on this machine needs ``loopback`` (or its address) added.

A connection to host H at address A is decided as follows:

1. link-local addresses and the cloud metadata services are always refused;
2. a DENY rule that matches H or A refuses it;
3. an ALLOW rule that matches H or A permits it;
4. anything else is refused.

An IPv6 address that reaches an IPv4 host through a translator (IPv4-mapped,
-translated or -compatible, NAT64's ``64:ff9b::/96``, 6to4's ``2002::/16``) is
judged as that IPv4 host; a local-use NAT64 address (``64:ff9b:1::/48``) is
refused when any place an IPv4 address may sit in it holds a link-local or
metadata address.

The check runs on the resolved address when the connection is made
(``PolicyResolver``, used by the calls' pool ``keepalive.Pool`` and by
aiohttp's sessions through ``sessions.PolicyConnector``), so a name that
resolves to an allowed address when a target is saved and to a forbidden one
later (DNS rebinding) is still refused. Targets also check literal addresses
and names when they are saved, for early feedback.

This module does not import aiohttp: a process whose calls go through the
pool (every run's targets and judges) never loads it, nor the two TLS
contexts its connector makes at import. ``PolicyConnector`` and
``policy_session`` are in ``runs.calls.sessions``, which imports this
module.
"""

from __future__ import annotations

import asyncio
import functools
import ipaddress
import re
import socket
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, TypedDict
from urllib.parse import urlsplit

import httpx
import yarl

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
IPNetwork = ipaddress.IPv4Network | ipaddress.IPv6Network

DEFAULT_ALLOW = ("public",)
KEYWORDS = frozenset({"loopback", "private", "public"})
# Refused whatever the operator allows: instance metadata hands out cloud
# credentials, and nothing a model server needs lives on a link-local address.
ALWAYS_REFUSED_NETWORKS: tuple[IPNetwork, ...] = tuple(
    ipaddress.ip_network(net)
    for net in (
        "169.254.0.0/16",  # IPv4 link-local, AWS/GCP/Azure metadata 169.254.169.254
        "fe80::/10",  # IPv6 link-local
        "fd00:ec2::254/128",  # AWS metadata over IPv6
        "100.100.100.200/32",  # Alibaba Cloud metadata
        "0.0.0.0/8",  # "this host": connecting to it reaches local services
        "::/128",
    )
)
# Any IPv4 position of a local-use NAT64 address holding one of these is
# refused (not "this host": the other positions of a valid address hold zeros).
_METADATA_NETWORKS = (
    ipaddress.IPv4Network("169.254.0.0/16"),
    ipaddress.IPv4Network("100.100.100.200/32"),
)
_EMBEDDING_PREFIXES = (
    ipaddress.IPv6Network("::ffff:0:0:0/96"),  # IPv4-translated (SIIT)
    ipaddress.IPv6Network("64:ff9b::/96"),  # NAT64, well-known prefix
)
_IPV4_COMPATIBLE = ipaddress.IPv6Network("::/96")
_LOCAL_NAT64 = ipaddress.IPv6Network("64:ff9b:1::/48")
ALWAYS_REFUSED_NAMES = frozenset(
    {"metadata.google.internal", "metadata.goog", "metadata"}
)
_NAME = re.compile(
    r"(?:\*|(?:\*\.)?(?:[a-z0-9_](?:[a-z0-9_-]{0,61}[a-z0-9_])?)"
    r"(?:\.[a-z0-9_](?:[a-z0-9_-]{0,61}[a-z0-9_])?)*)"
)


# Why a host is refused, as the refusal says it: what a user (or the operator
# they ask) can do about it.
NEVER_ALLOWED = "a link-local or cloud metadata address is never allowed"
DENIED = "EVALSITE_TARGET_DENY names it"
NOT_ALLOWED = (
    "no rule of EVALSITE_TARGET_ALLOW allows it (the operator may add its name, "
    "its network, loopback or private there)"
)


def refusal_text(host: str, reason: str = "") -> str:
    text = f"the network policy refuses connections to {host}"
    return f"{text}: {reason}" if reason else text


class PolicyRefused(Exception):
    """The network policy refused every address of a host.

    Through an aiohttp session it is a ``sessions.SessionRefused``, which is
    also an aiohttp ``ClientConnectionError``, as its callers catch them.
    """

    def __init__(self, host: str, reason: str = "") -> None:
        super().__init__(host)
        self.host = host
        self.reason = reason

    def __str__(self) -> str:
        return refusal_text(self.host, self.reason)


def _network_or_none(entry: str) -> IPNetwork | None:
    try:
        return ipaddress.ip_network(entry.strip("[]"))
    except ValueError:
        return None


def _numeric_host(host: str) -> bool:
    # Browsers and C resolvers read a host whose last label is a number as an
    # IPv4 address in some legacy form (2130706433, 127.1, 0x7f.1).
    last = host.rsplit(".", 1)[-1]
    return bool(re.fullmatch(r"[0-9]+|0x[0-9a-f]*", last, re.IGNORECASE))


def normalise_host(host: str) -> str:
    return host.strip().strip("[]").rstrip(".").lower()


def embedded_ipv4(address: ipaddress.IPv6Address) -> ipaddress.IPv4Address | None:
    """The IPv4 address an IPv6 address reaches through a translator, if any.

    IPv4-mapped (``::ffff:a.b.c.d``), IPv4-translated (``::ffff:0:a.b.c.d``),
    IPv4-compatible (``::a.b.c.d``), NAT64's well-known prefix
    (``64:ff9b::a.b.c.d``) and 6to4 (``2002:AABB:CCDD::``): a packet to such an
    address goes to the IPv4 host, so the address is judged as that host.
    """
    if address.ipv4_mapped is not None:
        return address.ipv4_mapped
    if address.sixtofour is not None:
        return address.sixtofour
    low = ipaddress.IPv4Address(int(address) & 0xFFFFFFFF)
    if any(address in prefix for prefix in _EMBEDDING_PREFIXES):
        return low
    if address in _IPV4_COMPATIBLE and int(address) > 1:  # not :: nor ::1
        return low
    return None


def local_nat64_ipv4s(address: ipaddress.IPv6Address) -> list[ipaddress.IPv4Address]:
    """The IPv4 addresses a local-use NAT64 address (``64:ff9b:1::/48``) may embed.

    Its translator chooses where the IPv4 address sits (RFC 6052: after a
    prefix of 48, 56, 64 or 96 bits, bits 64 to 71 left out), which is not
    known here: every position is a candidate.
    """
    if address not in _LOCAL_NAT64:
        return []
    value = int(address)
    # The 120 bits without bits 64 to 71, where no IPv4 address ever sits.
    bits = (value >> 64 << 56) | (value & (1 << 56) - 1)
    return [
        ipaddress.IPv4Address(bits >> (120 - offset - 32) & 0xFFFFFFFF)
        for offset in (48, 56, 64, 88)
    ]


def parse_ip(host: str) -> IPAddress | None:
    """The address a literal host names, an embedded IPv4 address unwrapped
    (``embedded_ipv4``); else None."""
    try:
        address = ipaddress.ip_address(normalise_host(host))
    except ValueError:
        return None
    if isinstance(address, ipaddress.IPv6Address):
        return embedded_ipv4(address) or address
    return address


def always_refused(address: IPAddress) -> bool:
    """Link-local, metadata and "this host" addresses, also behind local NAT64."""
    if any(address in network for network in ALWAYS_REFUSED_NETWORKS):
        return True
    if isinstance(address, ipaddress.IPv6Address):
        return any(
            candidate in network
            for candidate in local_nat64_ipv4s(address)
            for network in _METADATA_NETWORKS
        )
    return False


@dataclass(frozen=True, slots=True)
class Rules:
    """One list of rules (ALLOW or DENY), parsed."""

    networks: tuple[IPNetwork, ...] = ()
    names: frozenset[str] = frozenset()
    suffixes: tuple[str, ...] = ()  # ".example.org" for "*.example.org"
    keywords: frozenset[str] = frozenset()
    any_name: bool = False

    @classmethod
    def parse(cls, entries: Iterable[str]) -> Rules:
        """Parse rules; raise ValueError naming the first bad entry."""
        networks: list[IPNetwork] = []
        names: set[str] = set()
        suffixes: list[str] = []
        keywords: set[str] = set()
        any_name = False
        for raw in entries:
            entry = raw.strip().lower()
            if not entry:
                continue
            if entry in KEYWORDS:
                keywords.add(entry)
            elif entry == "*":
                any_name = True
            elif (network := _network_or_none(entry)) is not None:
                networks.append(network)
            elif "/" in entry or ":" in entry or _numeric_host(entry.rstrip(".")):
                raise ValueError(f"{raw.strip()!r} is not a network or an address")
            elif _NAME.fullmatch(entry):
                if entry.startswith("*."):
                    suffixes.append(entry[1:])
                else:
                    names.add(entry.rstrip("."))
            else:
                raise ValueError(
                    f"{raw.strip()!r} is neither a network, a host name, a *.suffix "
                    f"nor one of {', '.join(sorted(KEYWORDS))}"
                )
        return cls(
            tuple(networks),
            frozenset(names),
            tuple(suffixes),
            frozenset(keywords),
            any_name,
        )

    def matches_name(self, host: str) -> bool:
        if self.any_name or host in self.names:
            return True
        return any(host.endswith(suffix) for suffix in self.suffixes)

    def matches_address(self, address: IPAddress) -> bool:
        if any(address in network for network in self.networks):
            return True
        if "loopback" in self.keywords and address.is_loopback:
            return True
        if "public" in self.keywords and address.is_global:
            return True
        return (
            "private" in self.keywords
            and address.is_private
            and not address.is_loopback
            and not address.is_link_local
        )


@dataclass(frozen=True, slots=True)
class NetworkPolicy:
    allow: Rules
    deny: Rules

    @classmethod
    def parse(cls, allow: Sequence[str], deny: Sequence[str]) -> NetworkPolicy:
        return cls(Rules.parse(allow), Rules.parse(deny))

    def permits(self, host: str, address: IPAddress | None) -> bool:
        """Whether ``host`` may be reached at ``address`` (None: not yet resolved).

        With no address only the name is judged: the connection is checked
        again on every address the name resolves to.
        """
        return self.refusal(host, address) is None

    def refusal(self, host: str, address: IPAddress | None) -> str | None:
        """Why ``host`` may not be reached at ``address``; None when it may."""
        host = normalise_host(host)
        literal = parse_ip(host)
        name = None if literal is not None else host
        address = parse_ip(str(address)) if address is not None else literal
        if name is not None and name in ALWAYS_REFUSED_NAMES:
            return NEVER_ALLOWED
        if address is not None and always_refused(address):
            return NEVER_ALLOWED
        if (name is not None and self.deny.matches_name(name)) or (
            address is not None and self.deny.matches_address(address)
        ):
            return DENIED
        if name is not None and self.allow.matches_name(name):
            return None
        if address is None:
            # A name no rule names: its addresses decide at connect time.
            return None
        return None if self.allow.matches_address(address) else NOT_ALLOWED

    def check(
        self,
        host: str,
        address: IPAddress | None = None,
        *,
        refused: type[PolicyRefused] = PolicyRefused,
    ) -> None:
        reason = self.refusal(host, address)
        if reason is not None:
            raise refused(normalise_host(host), reason)


@functools.lru_cache(maxsize=8)
def _compiled(allow: tuple[str, ...], deny: tuple[str, ...]) -> NetworkPolicy:
    return NetworkPolicy.parse(allow, deny)


def current_policy() -> NetworkPolicy:
    """The policy of the current settings (parsed once per distinct value)."""
    from django.conf import settings

    return _compiled(
        tuple(getattr(settings, "EVALSITE_TARGET_ALLOW", DEFAULT_ALLOW)),
        tuple(getattr(settings, "EVALSITE_TARGET_DENY", ())),
    )


# -- connect time ----------------------------------------------------------------


class ResolveResult(TypedDict):
    """An address a name resolves to, as aiohttp's resolvers give it
    (``aiohttp.abc.ResolveResult``)."""

    hostname: str
    host: str
    port: int
    family: int
    proto: int
    flags: int


class Resolver(Protocol):
    """What ``PolicyResolver`` asks: aiohttp's ``AbstractResolver``."""

    async def resolve(
        self, host: str, port: int = 0, family: socket.AddressFamily = socket.AF_INET
    ) -> list[ResolveResult]: ...

    async def close(self) -> None: ...


# What aiohttp's ThreadedResolver asks of getaddrinfo and returns.
_ADDRCONFIG = socket.AI_ADDRCONFIG & getattr(socket, "AI_MASK", -1)
_NUMERIC_FLAGS = socket.AI_NUMERICHOST | socket.AI_NUMERICSERV
_NAME_FLAGS = socket.NI_NUMERICHOST | socket.NI_NUMERICSERV


class ThreadedResolver:
    """The system's resolver (``getaddrinfo`` in the event loop's threads), as
    aiohttp's default resolver asks it (``aiohttp.resolver.ThreadedResolver``,
    without aiodns) and with its answers."""

    async def resolve(
        self, host: str, port: int = 0, family: socket.AddressFamily = socket.AF_INET
    ) -> list[ResolveResult]:
        loop = asyncio.get_running_loop()
        infos = await loop.getaddrinfo(
            host, port, type=socket.SOCK_STREAM, family=family, flags=_ADDRCONFIG
        )
        results: list[ResolveResult] = []
        for found, _, proto, _, address in infos:
            resolved, port = str(address[0]), int(address[1])
            if found == socket.AF_INET6:
                if len(address) < 3:
                    continue  # IPv6 not supported by this Python
                if address[3]:  # a scope: a link-local address keeps it
                    resolved, service = await loop.getnameinfo(address, _NAME_FLAGS)
                    port = int(service)
            results.append(
                ResolveResult(
                    hostname=host,
                    host=resolved,
                    port=port,
                    family=found,
                    proto=proto,
                    flags=_NUMERIC_FLAGS,
                )
            )
        return results

    async def close(self) -> None:
        return None


# Looked up when a ``PolicyResolver`` is made (tests answer from a table).
DefaultResolver: Callable[[], Resolver] = ThreadedResolver


class PolicyResolver:
    """Resolves with the system's resolver, then keeps only the permitted
    addresses; a refusal is a ``refused``.

    The calls' pool and aiohttp connect only to what the resolver returns, so
    this is the check that DNS rebinding cannot pass.
    """

    refused: type[PolicyRefused] = PolicyRefused

    def __init__(self, policy: NetworkPolicy, inner: Resolver | None = None) -> None:
        self.policy = policy
        self.inner: Resolver = inner if inner is not None else DefaultResolver()

    async def resolve(
        self, host: str, port: int = 0, family: socket.AddressFamily = socket.AF_INET
    ) -> list[ResolveResult]:
        self.policy.check(host, refused=self.refused)
        results = await self.inner.resolve(host, port, family)
        permitted, reasons = [], []
        for result in results:
            address = parse_ip(result["host"])
            reason = (
                NOT_ALLOWED if address is None else self.policy.refusal(host, address)
            )
            if reason is None:
                permitted.append(result)
            else:
                reasons.append(reason)
        if not permitted:
            raise self.refused(normalise_host(host), reasons[0] if reasons else "")
        return permitted

    async def close(self) -> None:
        await self.inner.close()


def refusal_in(exc: BaseException) -> PolicyRefused | None:
    """The policy refusal behind an exception of the HTTP stack, if any."""
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        if isinstance(current, PolicyRefused):
            return current
        seen.add(id(current))
        current = current.__cause__ or current.__context__
    return None


# -- save time -------------------------------------------------------------------


def clean_target_url(value: Any, *, policy: NetworkPolicy | None = None) -> str:
    """Validate an endpoint base URL; raise ValueError saying what is wrong.

    Refused: other schemes than http and https, credentials in the URL, a
    query or a fragment (the endpoint's path is appended to the URL), and
    hosts the network policy refuses by name or literal address.
    """
    text = str(value or "").strip()
    if any(char.isspace() or char == "\\" or ord(char) < 32 for char in text):
        raise ValueError("must not contain spaces, backslashes or control characters")
    try:
        url = httpx.URL(text)
    except (httpx.InvalidURL, TypeError) as exc:
        raise ValueError(f"is not a URL: {exc}") from None
    if url.scheme not in ("http", "https") or not url.host:
        raise ValueError("must be an http:// or https:// URL with a host")
    if url.userinfo or "@" in urlsplit(text).netloc:
        raise ValueError(
            "must not carry a user name or password; use a project secret for the key"
        )
    if url.query or "?" in text:
        raise ValueError("must not have a query (?...)")
    if url.fragment or "#" in text:
        raise ValueError("must not have a fragment (#...)")
    # The ASCII (IDNA) form: what aiohttp resolves and connects to.
    host = url.raw_host.decode("ascii")
    if parse_ip(host) is None and _numeric_host(host):
        raise ValueError(f"{host} is not a canonical IP address")
    if yarl.URL(str(url)).raw_host != host:
        # A key is bound to the host read here; aiohttp must read the same.
        raise ValueError("has a host that URL parsers disagree on")
    policy = policy or current_policy()
    reason = policy.refusal(host, None)
    if reason is not None:
        raise ValueError(refusal_text(host, reason))
    return str(url)


def endpoint_url(base_url: str, path: str) -> httpx.URL:
    """``path`` appended to the base URL's path, as a path segment, never a query."""
    base = httpx.URL(base_url)
    # The raw (still percent-encoded) path: a decoded %3F would become a "?".
    directory = base.raw_path.split(b"?", 1)[0]
    if not directory.endswith(b"/"):
        directory += b"/"
    return base.copy_with(raw_path=directory, fragment=None).join(path.lstrip("/"))
