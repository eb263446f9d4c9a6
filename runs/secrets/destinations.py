"""Where a secret may be sent: host patterns with their scheme and port.

A project admin binds each project secret to patterns, and the operator each
variable of ``EVALSITE_ENV_SECRETS``; a secret goes only to a URL one of its
patterns matches. A pattern is ``host``, ``*.suffix`` (every name below the
suffix, not the suffix itself) or an IP address, optionally with a scheme and
a port: ``api.openai.com`` is ``https://api.openai.com:443``; plain
``http://`` must be written out, and another port too
(``http://127.0.0.1:8080``).

No Django here: the settings module parses the operator's bindings with it.
"""

from __future__ import annotations

import functools
import ipaddress
import re
from collections.abc import Iterable
from dataclasses import dataclass

import httpx

DEFAULT_PORTS = {"http": 80, "https": 443}
MAX_PATTERNS = 20
_LABEL = r"[a-z0-9_](?:[a-z0-9_-]{0,61}[a-z0-9_])?"
_NAME = re.compile(rf"{_LABEL}(?:\.{_LABEL})*")
_HOST_PORT = re.compile(r"(?P<host>\[[^\]]*\]|[^:\[\]]*)(?::(?P<port>[0-9]{1,5}))?")


def _bracketed(host: str) -> str:
    return f"[{host}]" if ":" in host else host


def origin(scheme: str, host: str, port: int) -> str:
    """``scheme://host[:port]``, the port left out when it is the scheme's own."""
    shown = "" if DEFAULT_PORTS.get(scheme) == port else f":{port}"
    return f"{scheme}://{_bracketed(host)}{shown}"


@dataclass(frozen=True, slots=True)
class Destination:
    """Where a request goes: scheme, host in its ASCII form, port."""

    scheme: str
    host: str
    port: int

    @classmethod
    def of(cls, url: str | httpx.URL) -> Destination | None:
        """The destination of a URL; None if it is not an http(s) URL with a host."""
        try:
            parsed = httpx.URL(str(url))
        except (httpx.InvalidURL, TypeError):
            return None
        if parsed.scheme not in DEFAULT_PORTS or not parsed.raw_host:
            return None
        host = parsed.raw_host.decode("ascii").strip("[]").rstrip(".").lower()
        address = _address(host)
        if address is not None:
            host = str(address)
        return cls(parsed.scheme, host, parsed.port or DEFAULT_PORTS[parsed.scheme])

    def __str__(self) -> str:
        return origin(self.scheme, self.host, self.port)


def _address(host: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address | None:
    try:
        return ipaddress.ip_address(host)
    except ValueError:
        return None


@dataclass(frozen=True, slots=True)
class HostPattern:
    """One pattern a secret is bound to."""

    scheme: str
    host: str  # a name, "*.suffix", or an address in its canonical form
    port: int

    @classmethod
    def parse(cls, text: str) -> HostPattern:
        """Parse a pattern; raise ValueError saying what is wrong."""
        raw = str(text).strip()
        entry = raw.lower()
        if not entry:
            raise ValueError("is empty")
        if any(char.isspace() or char in "@?#\\" for char in entry):
            raise ValueError(
                f"{raw!r} must be a host, *.suffix or scheme://host:port, "
                "without spaces, credentials, a query or a fragment"
            )
        scheme, sep, rest = entry.partition("://")
        if not sep:
            scheme, rest = "https", entry
        if scheme not in DEFAULT_PORTS:
            raise ValueError(f"{raw!r}: the scheme must be https or http")
        rest = rest.removesuffix("/")
        if "/" in rest:
            raise ValueError(f"{raw!r} must be a host and port, without a path")
        if _address(rest) is not None:  # an IPv6 address without brackets
            return cls(scheme, str(_address(rest)), DEFAULT_PORTS[scheme])
        match = _HOST_PORT.fullmatch(rest)
        if match is None:
            raise ValueError(f"{raw!r} is not host or host:port")
        host = match["host"].strip("[]").rstrip(".")
        port = int(match["port"]) if match["port"] else DEFAULT_PORTS[scheme]
        if not 1 <= port <= 65535:
            raise ValueError(f"{raw!r}: the port must be 1 to 65535")
        address = _address(host)
        if address is not None:
            return cls(scheme, str(address), port)
        if match["host"].startswith("["):
            raise ValueError(f"{raw!r}: {host!r} is not an IPv6 address")
        name = host.removeprefix("*.")
        if not host.isascii():
            raise ValueError(f"{raw!r}: write the host in its ASCII (xn--) form")
        if not _NAME.fullmatch(name) or re.fullmatch(r"[0-9.]+|.*\.[0-9]+", name):
            raise ValueError(
                f"{raw!r} is not a host name, *.suffix or IP address"
                + (" (* alone would be every host)" if host == "*" else "")
            )
        return cls(scheme, host, port)

    def matches(self, destination: Destination) -> bool:
        if (destination.scheme, destination.port) != (self.scheme, self.port):
            return False
        if self.host.startswith("*."):
            return _address(destination.host) is None and destination.host.endswith(
                self.host[1:]
            )
        return destination.host == self.host

    def __str__(self) -> str:
        if self.scheme == "https" and self.port == 443:
            return _bracketed(self.host)
        return origin(self.scheme, self.host, self.port)


def clean_patterns(values: Iterable[str]) -> list[str]:
    """Patterns in their canonical form, duplicates dropped; ValueError if bad."""
    cleaned: list[str] = []
    for value in values:
        text = str(HostPattern.parse(value))
        if text not in cleaned:
            cleaned.append(text)
    if len(cleaned) > MAX_PATTERNS:
        raise ValueError(f"at most {MAX_PATTERNS} hosts")
    return cleaned


@functools.lru_cache(maxsize=1024)
def _parsed(patterns: tuple[str, ...]) -> tuple[HostPattern, ...]:
    parsed = []
    for pattern in patterns:
        try:
            parsed.append(HostPattern.parse(pattern))
        except ValueError:
            continue  # a pattern edited by hand in the database matches nothing
    return tuple(parsed)


def permits(patterns: Iterable[str], url: str | httpx.URL) -> bool:
    """Whether one of the (stored, valid) patterns matches the URL's destination."""
    destination = Destination.of(url)
    if destination is None:
        return False
    return any(pattern.matches(destination) for pattern in _parsed(tuple(patterns)))
