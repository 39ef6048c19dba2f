"""The SSRF guard's IO shell: save-time and connect-time checks of account-owned upstreams.

Save time: :func:`check_base_url` reads the URL
(:func:`~sluice.transport.address_policy.check_url`), resolves the host and refuses it
when any answer is not public.

Connect time, on a connector from :func:`guarded_connector`:

* :class:`GuardedResolver` resolves with the real resolver and drops every denied
  answer, so what aiohttp connects to is what was checked (a name that changes its
  answer after it was saved, DNS rebinding, finds nothing left to connect to);
* :func:`guarded_socket_factory` checks the address of every socket the connector opens,
  which also covers IP literals (aiohttp does not send those through the resolver).

A refusal is a :class:`DeniedAddressError` (an ``OSError``); aiohttp wraps it in a
``ClientConnectorError``, which :func:`sluice.transport.failures.map_client_error` turns into
``upstream_error`` / ``upstream_connect_failed``. Redirects are never followed by the
transport, so no other address can be reached through a ``Location`` header.
"""

from __future__ import annotations

import asyncio
import errno
import socket
from collections.abc import Awaitable, Callable, Sequence
from ipaddress import ip_address
from typing import Any

import aiohttp
from aiohttp.abc import AbstractResolver, ResolveResult

from sluice.errors import InvalidRequestError
from sluice.transport.address_policy import (
    CODE_INVALID,
    PARAM,
    UpstreamHost,
    address_denial,
    article,
    check_url,
    denied,
)
from sluice.transport.pool import PoolConnector

Resolve = Callable[[str, int], Awaitable[Sequence[str]]]
"""``(host, port) -> IP address strings``; raises ``OSError`` when the name is unknown."""

AddrInfo = tuple[int, int, int, str, tuple[Any, ...]]
"""One ``getaddrinfo`` row: family, type, proto, canonname, sockaddr."""

SocketFactory = Callable[[AddrInfo], socket.socket]


class DeniedAddressError(OSError):
    """No address of this upstream may be connected to."""

    def __init__(self, host: str, reason: str) -> None:
        super().__init__(errno.EACCES, f"upstream {host} resolves to {article(reason)} address")
        self.host = host
        self.reason = reason


def answer_denial(answer: str) -> str | None:
    """:func:`address_denial` of one resolver answer (``"fe80::1%eth0"`` included)."""
    try:
        return address_denial(ip_address(answer))
    except ValueError:
        return "unreadable"


class GuardedResolver(AbstractResolver):
    """Wraps a real resolver and keeps only the answers that may be connected to."""

    def __init__(self, inner: AbstractResolver, *, allow_private: bool = False) -> None:
        self._inner = inner
        self._allow_private = allow_private

    async def resolve(
        self, host: str, port: int = 0, family: socket.AddressFamily = socket.AF_INET
    ) -> list[ResolveResult]:
        answers = await self._inner.resolve(host, port, family)
        if self._allow_private:
            return answers
        kept: list[ResolveResult] = []
        reasons: list[str] = []
        for answer in answers:
            reason = answer_denial(answer["host"])
            if reason is None:
                kept.append(answer)
            else:
                reasons.append(reason)
        if reasons and not kept:
            raise DeniedAddressError(host, reasons[0])
        return kept

    async def close(self) -> None:
        await self._inner.close()


def sized_socket_factory(receive_buffer: int = 0) -> SocketFactory:
    """A ``TCPConnector(socket_factory=…)`` whose sockets have ``SO_RCVBUF`` pinned to
    ``receive_buffer`` bytes before they connect (0: the kernel's autotuning), which
    bounds what the kernel holds from an upstream the gateway stopped reading."""

    def open_socket(addr_info: AddrInfo) -> socket.socket:
        family, type_, proto, _, _ = addr_info
        sock = socket.socket(family=family, type=type_, proto=proto)
        if receive_buffer:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, receive_buffer)
        return sock

    return open_socket


def guarded_socket_factory(
    *, allow_private: bool = False, receive_buffer: int = 0
) -> SocketFactory:
    """A :func:`sized_socket_factory` that refuses to open a socket to a denied
    address: the last check, on the exact address about to be connected to."""
    sized = sized_socket_factory(receive_buffer)

    def open_socket(addr_info: AddrInfo) -> socket.socket:
        host = str(addr_info[4][0])
        if not allow_private:
            reason = answer_denial(host)
            if reason is not None:
                raise DeniedAddressError(host, reason)
        return sized(addr_info)

    return open_socket


def guarded_connector(
    *,
    allow_private: bool = False,
    resolver: AbstractResolver | None = None,
    receive_buffer: int = 0,
    **options: Any,
) -> PoolConnector:
    """A connector for account-owned upstreams only (it must not share a pool with the
    operator's own upstreams, which may be private). ``resolver`` (default: the system
    resolver in a thread) stays the caller's to close; ``options`` go to
    :class:`aiohttp.TCPConnector`. Call it inside a running event loop."""
    inner = resolver if resolver is not None else aiohttp.ThreadedResolver()
    return PoolConnector(
        resolver=GuardedResolver(inner, allow_private=allow_private),
        socket_factory=guarded_socket_factory(
            allow_private=allow_private, receive_buffer=receive_buffer
        ),
        **options,
    )


async def check_base_url(
    url: str, *, allow_private: bool, resolve: Resolve, resolve_within: float = 5.0
) -> UpstreamHost:
    """Save-time check of an account's ``base_url``: the URL, then every address its
    host resolves to now (within ``resolve_within`` seconds). Raises
    :class:`InvalidRequestError` (``param="base_url"``)."""
    target = check_url(url, allow_private=allow_private)
    if allow_private or target.address is not None:
        return target
    try:
        async with asyncio.timeout(resolve_within):
            answers = await resolve(target.host, target.port)
    except (OSError, TimeoutError):
        answers = ()
    if not answers:
        raise InvalidRequestError(
            "base_url host could not be resolved", code=CODE_INVALID, param=PARAM
        )
    for answer in answers:
        reason = answer_denial(answer)
        if reason is not None:
            raise denied(f"base_url resolves to {article(reason)} address")
    return target


def resolver_lookup(resolver: AbstractResolver) -> Resolve:
    """An aiohttp resolver as a :data:`Resolve` function (both address families)."""

    async def lookup(host: str, port: int) -> list[str]:
        answers = await resolver.resolve(host, port, family=socket.AF_UNSPEC)
        return [answer["host"] for answer in answers]

    return lookup


async def system_resolve(host: str, port: int) -> list[str]:
    """The system resolver (``getaddrinfo`` in a thread) as a :data:`Resolve` function;
    a name IDNA cannot encode is one that does not resolve."""
    try:
        infos = await asyncio.get_running_loop().getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except UnicodeError:
        raise socket.gaierror(socket.EAI_NONAME, f"{host!r} is not a name") from None
    return [str(info[4][0]) for info in infos]
