"""Keep-alive connections to upstreams, by origin, and how a new one is opened.

A :class:`ConnectionPool` hands out an idle connection to the same origin when it has
one (idle ones are closed after ``keepalive`` seconds) and opens new ones: the host's
addresses (cached ``dns_ttl`` seconds), in a guarded pool only the
addresses that may be reached (:func:`~sluice.transport.guarded_resolver.allowed`),
raced by Happy Eyeballs (RFC 8305: the next address is tried 250 ms after the one
before, families interleaved, the first to connect wins), each on a socket with the
configured receive buffer. Without the race an address that swallows connection
attempts (an IPv6 route that goes nowhere) cost the whole connect timeout.
"""

from __future__ import annotations

import asyncio
import socket
import ssl
from collections.abc import Awaitable, Callable, Sequence

from aiohappyeyeballs import start_connection

from sluice.transport.failures import ConnectFailedError
from sluice.transport.guarded_resolver import (
    AddrInfo,
    allowed,
    system_addresses,
)
from sluice.transport.h1_connection import H1Connection

Origin = tuple[str, str, int]
"""scheme, host, port."""
Lookup = Callable[[str, int], Awaitable[Sequence[AddrInfo]]]
HAPPY_EYEBALLS_DELAY = 0.25
"""Seconds before the next address is tried while one is still connecting (RFC 8305's
recommended delay, and aiohttp's)."""


class ConnectionPool:
    """One pool of connections: the operator's upstreams, or accounts' own (guarded)."""

    def __init__(
        self,
        *,
        guarded: bool,
        allow_private: bool,
        receive_buffer: int = 0,
        keepalive: float = 30.0,
        dns_ttl: float = 300.0,
        lookup: Lookup | None = None,
    ) -> None:
        self._loop = asyncio.get_running_loop()
        self._guarded = guarded and not allow_private
        self._receive_buffer = receive_buffer
        self._keepalive = keepalive
        self._dns_ttl = dns_ttl
        self._lookup = lookup or system_addresses
        self._idle: dict[Origin, list[H1Connection]] = {}
        self._answers: dict[tuple[str, int], tuple[float, Sequence[AddrInfo]]] = {}
        self._tls: ssl.SSLContext | None = None
        self._sweep: asyncio.TimerHandle | None = None
        self.closed = False

    def take(self, origin: Origin) -> H1Connection | None:
        """An idle connection to ``origin``, the most recently used first."""
        idle = self._idle.get(origin)
        while idle:
            conn = idle.pop()
            if not conn.lost:
                return conn
        return None

    def give_back(self, origin: Origin, conn: H1Connection) -> None:
        """A connection whose response was read to its end, for the next request."""
        if self.closed:
            conn.close()
            return
        conn.idle_since = self._loop.time()
        self._idle.setdefault(origin, []).append(conn)
        if self._sweep is None:
            self._sweep = self._loop.call_later(self._keepalive, self._close_stale)

    def close(self) -> None:
        self.closed = True
        if self._sweep is not None:
            self._sweep.cancel()
            self._sweep = None
        idle, self._idle = self._idle, {}
        for conns in idle.values():
            for conn in conns:
                conn.close()

    def _close_stale(self) -> None:
        self._sweep = None
        due = self._loop.time() - self._keepalive
        for origin, conns in list(self._idle.items()):
            stale = [c for c in conns if c.idle_since <= due or c.lost]
            for conn in stale:
                conns.remove(conn)
                conn.close()
            if not conns:
                del self._idle[origin]
        if self._idle:
            self._sweep = self._loop.call_later(self._keepalive, self._close_stale)

    async def open(self, origin: Origin) -> H1Connection:
        """A new connection to ``origin``; raises :class:`ConnectFailedError`."""
        scheme, host, port = origin
        try:
            answers = await self._addresses(host, port)
        except OSError as exc:
            raise ConnectFailedError(exc) from None
        tls = self._tls_context() if scheme == "https" else None
        try:
            sock = await start_connection(
                answers,
                happy_eyeballs_delay=HAPPY_EYEBALLS_DELAY,
                interleave=1,
                socket_factory=self._socket,
            )
        except OSError as exc:
            raise ConnectFailedError(exc) from None
        try:
            _, conn = await self._loop.create_connection(
                H1Connection, sock=sock, ssl=tls, server_hostname=host if tls else None
            )
        except OSError as exc:  # ssl.SSLError is one
            sock.close()
            raise ConnectFailedError(exc) from None
        except BaseException:
            sock.close()
            raise
        return conn

    def _socket(self, answer: AddrInfo) -> socket.socket:
        """A socket for one address, its receive buffer set before it connects."""
        family, type_, proto, _, _ = answer
        sock = socket.socket(family, type_, proto)
        if self._receive_buffer:
            try:
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, self._receive_buffer)
            except OSError:
                sock.close()
                raise
        return sock

    async def _addresses(self, host: str, port: int) -> Sequence[AddrInfo]:
        """The host's addresses (cached); in a guarded pool only those that may be
        reached, :class:`DeniedAddressError` when none is left."""
        now = self._loop.time()
        cached = self._answers.get((host, port))
        if cached is not None and cached[0] > now:
            answers = cached[1]
        else:
            answers = await self._lookup(host, port)
            self._answers[host, port] = (now + self._dns_ttl, answers)
        if not self._guarded:
            return answers
        return allowed(host, answers)

    def _tls_context(self) -> ssl.SSLContext:
        if self._tls is None:
            self._tls = ssl.create_default_context()
        return self._tls
