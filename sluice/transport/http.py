"""The only place the upstream HTTP client lives; its exceptions become our errors here, once.

:class:`HttpTransport` implements :class:`~sluice.transport.port.Transport` over two
:class:`~sluice.transport.pool.ConnectionPool` s per gateway process (the operator's
upstreams, and accounts' own, guarded) of
:class:`~sluice.transport.h1_connection.H1Connection` s. Redirects are never followed
(an upstream redirect is an upstream error, not a new destination). In-process
upstreams (:class:`~sluice.core.upstream_request.LocalUpstream`) are run by
:class:`LocalResponse` behind the same :class:`~sluice.transport.port.UpstreamResponse`
shape.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterator, Mapping
from typing import TYPE_CHECKING

from yarl import URL

from sluice.core.connection import Timeouts
from sluice.core.upstream_request import UpstreamRequest
from sluice.errors import RequestTimeoutError, ShuttingDownError, UpstreamError
from sluice.transport.failures import (
    ConnectTimeoutError,
    RequestNotSentError,
    UnreadableResponseError,
    UpstreamClosedError,
    deadline_error,
    log_failure,
    map_client_error,
)
from sluice.transport.h1_connection import H1Connection
from sluice.transport.pool import ConnectionPool, Origin

if TYPE_CHECKING:
    from sluice.transport.aws_sigv4 import AwsSigner
from sluice.transport.port import UpstreamResponse

_UNSAFE = frozenset("\r\n\0")
"""Characters no request head line may carry (a header value with a line break would
start a header, or a request, of its own)."""


class HttpResponse:
    """An upstream response behind our shape, with a cheap watchdog for the stall and
    the total deadline.

    The watchdog is one timer per response: each read only notes when it started
    waiting, and the timer re-arms itself from there instead of being reset per chunk.
    Silence only counts while a read is waiting: time the gateway spends blocked on a
    slow client is not the provider's. The total deadline counts all the time.
    """

    __slots__ = (
        "_conn",
        "_cut",
        "_deadline",
        "_last",
        "_loop",
        "_origin",
        "_pool",
        "_reading",
        "_released",
        "_stall",
        "_timer",
        "_total",
        "headers",
        "status",
    )

    def __init__(
        self,
        conn: H1Connection,
        pool: ConnectionPool | None,
        origin: Origin,
        sent_at: float,
        total: float,
    ) -> None:
        """``pool``: where the connection goes back once read to its end (``None``: it
        is closed then)."""
        self._conn = conn
        self._pool = pool
        self._origin = origin
        self._loop = asyncio.get_running_loop()
        self._total = total
        self._deadline = sent_at + total
        self._stall = 0.0
        self._last = 0.0
        self._cut: RequestTimeoutError | None = None  # why the watchdog closed the body
        self._reading = False
        self._released = False
        self._timer: asyncio.TimerHandle | None = self._loop.call_at(self._deadline, self._check)
        self.status = conn.status
        self.headers: Mapping[str, str] = conn.headers

    def watch(self, stall: float) -> None:
        self._stall = stall
        self._last = self._loop.time()
        self._arm(min(self._last + stall, self._deadline))

    def _arm(self, when: float) -> None:
        if self._timer is not None:
            self._timer.cancel()
        self._timer = self._loop.call_at(when, self._check)

    def _check(self) -> None:
        self._timer = None
        now = self._loop.time()
        if now >= self._deadline:
            self._close_for(deadline_error(self._total))
            return
        if not self._stall:
            self._arm(self._deadline)
            return
        if not self._reading:  # busy writing to a slow client: not the provider's silence
            self._last = now
        due = self._last + self._stall
        if now < due:
            self._arm(min(due, self._deadline))
            return
        self._close_for(
            RequestTimeoutError(
                f"The provider sent nothing for {self._stall:g} s.",
                code="stream_stalled",
                http_status=504,
            )
        )

    def _close_for(self, reason: RequestTimeoutError) -> None:
        self._cut = reason
        self._conn.close()

    async def read_chunk(self) -> bytes:
        self._reading = True
        self._last = self._loop.time()  # silence counts from when we start waiting
        try:
            data = await self._conn.read()
        except (UpstreamClosedError, UnreadableResponseError) as exc:
            if self._cut is not None:
                raise self._cut from None
            raise map_client_error(exc, connecting=False) from None
        finally:
            self._reading = False
        if self._cut is not None:
            raise self._cut
        if not data:
            self.release()  # read to its end: back to the pool whoever forgets to say so
        return data

    async def read_body(self, limit: int) -> bytes:
        parts: list[bytes] = []
        size = 0
        while size < limit:
            data = await self.read_chunk()
            if not data:
                break
            parts.append(data)
            size += len(data)
        return b"".join(parts)[:limit]

    def _unwatch(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None

    def close(self) -> None:
        if not self._released:
            self._unwatch()
            self._conn.close()

    def release(self) -> None:
        if self._released:  # the connection may carry another request by now
            return
        self._released = True
        self._unwatch()
        if self._pool is not None and self._conn.reusable:
            self._pool.give_back(self._origin, self._conn)
        else:
            self._conn.close()


class LocalResponse:
    """Runs an in-process upstream's script: sleep, then hand over the bytes, within
    the connection's total deadline like any upstream."""

    __slots__ = ("_deadline", "_loop", "_script", "_total", "headers", "status")

    def __init__(self, script: Iterator[tuple[float, bytes]], sent_at: float, total: float) -> None:
        self._script = script
        self._loop = asyncio.get_running_loop()
        self._total = total
        self._deadline = sent_at + total
        self.status = 200
        self.headers: Mapping[str, str] = {}

    async def read_chunk(self) -> bytes:
        for pause, data in self._script:
            if pause > 0:
                left = self._deadline - self._loop.time()
                if pause > left:
                    await asyncio.sleep(max(left, 0.0))
                    self._script = iter(())
                    raise deadline_error(self._total)
                await asyncio.sleep(pause)
            if data:
                return data
        return b""

    async def read_body(self, limit: int) -> bytes:
        parts = []
        while data := await self.read_chunk():
            parts.append(data)
        return b"".join(parts)[:limit]

    def close(self) -> None:
        self._script = iter(())

    def release(self) -> None:
        self._script = iter(())

    def watch(self, stall: float) -> None:
        """The script's pauses are the configured pace; nothing to watch."""


class HttpTransport:
    """The :class:`~sluice.transport.port.Transport`; one instance per gateway process.

    Two pools: the operator's upstreams, and accounts' own (guarded: checked addresses,
    never the operator's pool). A resend goes out on a new connection, closed after.
    """

    def __init__(
        self,
        user_agent: str,
        clock: Callable[[], float],
        *,
        allow_private_upstreams: bool,
        receive_buffer_bytes: int = 0,
    ) -> None:
        """``receive_buffer_bytes``: ``SO_RCVBUF`` of upstream sockets (0: autotuned)."""
        self._user_agent = user_agent
        self._clock = clock
        self._allow_private = allow_private_upstreams
        self._receive_buffer = receive_buffer_bytes
        self._pools: dict[bool, ConnectionPool] = {}
        """guarded -> pool."""
        self._signer: AwsSigner | None = None

    async def start(self) -> None:
        for guarded in (False, True):
            self._pools[guarded] = ConnectionPool(
                guarded=guarded,
                allow_private=self._allow_private,
                receive_buffer=self._receive_buffer,
            )

    async def close(self) -> None:
        pools, self._pools = self._pools, {}
        for pool in pools.values():
            pool.close()

    def signing_secrets(self) -> tuple[str, ...]:
        """The AWS credentials this process signs with, if it has read any."""
        return () if self._signer is None else self._signer.secrets()

    async def send(
        self,
        req: UpstreamRequest,
        timeouts: Timeouts,
        *,
        guarded: bool = False,
        fresh: bool = False,
    ) -> UpstreamResponse:
        """``guarded``: an account's own connection (SSRF checks, its own pool);
        ``fresh``: on a new connection (a resend). Raises :class:`RequestNotSentError`
        when the request certainly did not reach the upstream: it may be sent again."""
        sent_at = asyncio.get_running_loop().time()
        if req.local is not None:
            return LocalResponse(req.local.script(), sent_at, timeouts.total)
        pool = self._pools.get(guarded)
        if pool is None:
            raise ShuttingDownError()
        headers = req.headers
        if req.aws_sigv4 is not None:
            if self._signer is None:
                self._signer = aws_signer(self._clock)
            headers = await self._signer.sign(req, req.aws_sigv4)
        url = URL(req.url, encoded=True)  # sent exactly as built (and as signed)
        origin: Origin = (url.scheme, url.raw_host or "", url.port or 0)
        head = self._head(req.method, url, headers, len(req.body))
        # first event and stall are enforced by the router and the response watchdog
        conn = None if fresh else pool.take(origin)
        if conn is None:
            conn = await self._open(pool, origin, req.url, timeouts.connect)
        try:
            await conn.send(head, req.body)
        except UpstreamClosedError as exc:
            if conn.requests > 1 and not conn.written:
                raise RequestNotSentError() from None
            log_failure(req.url, exc)
            raise map_client_error(exc, connecting=True) from None
        except UnreadableResponseError as exc:
            log_failure(req.url, exc)
            raise map_client_error(exc, connecting=True) from None
        except BaseException:
            conn.close()
            raise
        if pool.closed:
            conn.close()
            raise ShuttingDownError()
        return HttpResponse(conn, None if fresh else pool, origin, sent_at, timeouts.total)

    @staticmethod
    async def _open(pool: ConnectionPool, origin: Origin, url: str, within: float) -> H1Connection:
        try:
            async with asyncio.timeout(within):
                return await pool.open(origin)
        except TimeoutError:
            exc: Exception = ConnectTimeoutError()
            log_failure(url, exc)
            raise map_client_error(exc, connecting=True) from None
        except Exception as exc:
            log_failure(url, exc)
            raise map_client_error(exc, connecting=True) from None

    def _head(self, method: str, url: URL, headers: Mapping[str, str], length: int) -> bytes:
        """The request line and headers: ``Host``, our ``User-Agent`` unless the request
        names one, and ``Content-Length``."""
        lines = [f"{method} {url.raw_path_qs} HTTP/1.1\r\n"]
        if "host" not in headers:
            lines.append(f"host: {url.host_port_subcomponent}\r\n")
        if "user-agent" not in headers:
            lines.append(f"user-agent: {self._user_agent}\r\n")
        for name, value in headers.items():
            if not _UNSAFE.isdisjoint(value) or not _UNSAFE.isdisjoint(name):
                raise UpstreamError(
                    f"The request header {name!r} holds a line break.",
                    code="upstream_misconfigured",
                )
            lines.append(f"{name}: {value}\r\n")
        lines.append(f"content-length: {length}\r\n\r\n")
        return "".join(lines).encode("utf-8")


AWS_EXTRA_MISSING = (
    "This connection signs its requests for AWS, which needs the aws extra: "
    "pip install 'sluice-gateway[aws]' (botocore: SigV4 and the AWS credential chain)."
)


def aws_signer(clock: Callable[[], float]) -> AwsSigner:
    """The SigV4 signer, imported when a connection first needs it (botocore is the
    ``aws`` extra); without it the request fails naming the extra."""
    try:
        from sluice.transport.aws_sigv4 import AwsSigner
    except ImportError:
        raise UpstreamError(AWS_EXTRA_MISSING, code="upstream_misconfigured") from None
    return AwsSigner(clock)
