"""The SSRF guard's IO shell: save-time and connect-time checks of account-owned upstreams.

Save time: :func:`check_base_url` reads the URL
(:func:`~sluice.transport.address_policy.check_url`), resolves the host and refuses it
when any answer is not public.

Connect time, in a guarded :class:`~sluice.transport.pool.ConnectionPool`: every address
the host resolves to (an IP literal resolves to itself) passes :func:`answer_denial`
before it is connected to, so what is connected to is what was checked (a name that
changes its answer after it was saved, DNS rebinding, finds nothing left to connect
to). A refusal is a :class:`DeniedAddressError` (an ``OSError``), which
:func:`sluice.transport.failures.map_client_error` turns into ``upstream_error`` /
``upstream_connect_failed``. Redirects are never followed by the transport, so no
other address can be reached through a ``Location`` header.
"""

from __future__ import annotations

import asyncio
import errno
import socket
from collections.abc import Awaitable, Callable, Sequence
from ipaddress import ip_address
from typing import Any

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

Resolve = Callable[[str, int], Awaitable[Sequence[str]]]
"""``(host, port) -> IP address strings``; raises ``OSError`` when the name is unknown."""

AddrInfo = tuple[int, int, int, str, tuple[Any, ...]]
"""One ``getaddrinfo`` row: family, type, proto, canonname, sockaddr."""


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


def allowed(host: str, answers: Sequence[AddrInfo]) -> list[AddrInfo]:
    """The answers that may be connected to; :class:`DeniedAddressError` with the first
    answer's reason when none is left."""
    kept = [answer for answer in answers if answer_denial(str(answer[4][0])) is None]
    if answers and not kept:
        raise DeniedAddressError(host, answer_denial(str(answers[0][4][0])) or "denied")
    return kept


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


async def system_addresses(host: str, port: int) -> Sequence[AddrInfo]:
    """The system resolver (``getaddrinfo`` in a thread); a name IDNA cannot encode is
    one that does not resolve."""
    try:
        infos = await asyncio.get_running_loop().getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except UnicodeError:
        raise socket.gaierror(socket.EAI_NONAME, f"{host!r} is not a name") from None
    return infos


async def system_resolve(host: str, port: int) -> list[str]:
    """:func:`system_addresses` as a :data:`Resolve` function."""
    return [str(info[4][0]) for info in await system_addresses(host, port)]
