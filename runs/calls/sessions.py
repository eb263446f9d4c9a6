"""aiohttp sessions through the network policy, for the requests that are
not a target's or a judge's call: an agent's HTTP tools and the alerts'
webhooks. (The calls go through ``keepalive.Pool``, which needs no aiohttp.)

Importing aiohttp builds its connector's two default TLS contexts, each
loading the system's certificates: only a process that makes such a request
imports this module.
"""

from __future__ import annotations

from typing import Any

import aiohttp
from aiohttp.abc import AbstractResolver

from runs.calls.keepalive import connect_failure
from runs.calls.netpolicy import (
    NetworkPolicy,
    PolicyRefused,
    PolicyResolver,
    ResolveResult,
    current_policy,
    parse_ip,
)


class SessionRefused(PolicyRefused, aiohttp.ClientConnectionError):
    """A refusal of the network policy, as an aiohttp session raises it: one of
    aiohttp's client errors, which its callers catch."""


class SessionResolver(PolicyResolver, AbstractResolver):
    """``PolicyResolver`` as aiohttp's connector takes it."""

    refused = SessionRefused


if not hasattr(aiohttp.TCPConnector, "_resolve_host"):  # pragma: no cover
    raise ImportError("aiohttp no longer has TCPConnector._resolve_host")


class PolicyConnector(aiohttp.TCPConnector):
    """A connector whose every address, literal or resolved, passes the policy."""

    def __init__(self, policy: NetworkPolicy, **kwargs: Any) -> None:
        super().__init__(resolver=SessionResolver(policy), **kwargs)
        self.policy = policy

    async def _resolve_host(
        self, host: str, port: int, traces: Any = None
    ) -> list[ResolveResult]:
        # aiohttp never hands a literal address to the resolver.
        literal = parse_ip(host)
        if literal is not None:
            self.policy.check(host, literal, refused=SessionRefused)
        return await super()._resolve_host(host, port, traces=traces)


def policy_session(policy: NetworkPolicy | None = None) -> aiohttp.ClientSession:
    """An aiohttp session for outbound requests of tools and alerts.

    No connection limit (the executor bounds the calls in flight), no proxy
    from the environment (it would hide the destination from the policy).
    """
    connector = PolicyConnector(policy or current_policy(), limit=0)
    return aiohttp.ClientSession(connector=connector, trust_env=False)


def network_error_message(exc: aiohttp.ClientError) -> str:
    """A network error as a person reads it.

    aiohttp says "Cannot connect to host h:p ssl:default [Connect call failed
    ...]", naming TLS even for an ``http://`` URL: a connection that failed
    before TLS is said as "cannot connect to h:p (connection refused)".
    """
    if isinstance(exc, aiohttp.ClientConnectorError) and not isinstance(
        exc, aiohttp.ClientSSLError
    ):
        return connect_failure(exc.host, exc.port, exc.os_error)
    return f"{type(exc).__name__}: {exc}"
