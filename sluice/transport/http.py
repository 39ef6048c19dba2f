"""The only place the HTTP client lives; its exceptions become our errors here, once.

One pooled :class:`aiohttp.ClientSession` per gateway process. Redirects are never
followed (an upstream redirect is an upstream error, not a new destination).
In-process upstreams (:class:`~sluice.providers.base.LocalUpstream`) are run by
:class:`LocalResponse` behind the same :class:`UpstreamResponse` shape.
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Callable, Iterator, Mapping
from typing import Any, Protocol

import aiohttp
from yarl import URL

from sluice.config import Timeouts
from sluice.errors import ApiError, RequestTimeoutError, ServiceUnavailableError, UpstreamError
from sluice.providers.base import UpstreamRequest
from sluice.transport.aws_sigv4 import AwsSigner
from sluice.transport.guarded_resolver import guarded_connector
from sluice.transport.pool import PoolConnector

_READ_SIZE = 64 * 1024


class UpstreamResponse(Protocol):
    status: int
    headers: Mapping[str, str]

    async def read_chunk(self) -> bytes:
        """The next bytes that arrived; ``b""`` at the end of the body."""
        ...

    async def read_body(self, limit: int) -> bytes:
        """The whole body, at most ``limit`` bytes of it."""
        ...

    def close(self) -> None:
        """Drop the upstream connection now (the provider sees the client go away)."""
        ...

    def watch(self, stall: float) -> None:
        """From now on, silence longer than ``stall`` seconds ends the body with
        ``request_timeout`` / ``stream_stalled``."""
        ...

    def release(self) -> None:
        """The body was read to its end; the connection may be reused."""
        ...


def map_client_error(exc: BaseException, connecting: bool) -> ApiError:
    """aiohttp and socket failures, in our terms. ``connecting``: before the response head."""
    if isinstance(exc, aiohttp.ConnectionTimeoutError):
        return RequestTimeoutError(
            "Timed out connecting to the provider.",
            code="upstream_connect_timeout",
            http_status=504,
        )
    if isinstance(exc, asyncio.TimeoutError):
        if connecting:
            return RequestTimeoutError(
                "The provider did not answer in time.", code="upstream_timeout", http_status=504
            )
        return RequestTimeoutError(
            "The provider stopped sending data.", code="stream_stalled", http_status=504
        )
    if isinstance(exc, aiohttp.ClientConnectorError):
        return UpstreamError("Could not connect to the provider.", code="upstream_connect_failed")
    if isinstance(exc, aiohttp.ClientPayloadError | aiohttp.ServerDisconnectedError):
        return UpstreamError(
            "The response stream ended before it completed.", code="upstream_disconnected"
        )
    return UpstreamError(
        f"The provider request failed ({type(exc).__name__}).", code="upstream_transport_error"
    )


class HttpResponse:
    """An aiohttp response behind our shape, with a cheap stall watchdog.

    The watchdog is one timer per response: each read only notes when it started
    waiting, and the timer re-arms itself from there instead of being reset per chunk.
    Silence only counts while a read is waiting: time the gateway spends blocked on a
    slow client is not the provider's.
    """

    __slots__ = (
        "_last",
        "_loop",
        "_reading",
        "_resp",
        "_stall",
        "_stalled",
        "_timer",
        "headers",
        "status",
    )

    def __init__(self, resp: aiohttp.ClientResponse) -> None:
        self._resp = resp
        self._loop = asyncio.get_running_loop()
        self._timer: asyncio.TimerHandle | None = None
        self._stall = 0.0
        self._last = 0.0
        self._stalled = False
        self._reading = False
        self.status = resp.status
        self.headers: Mapping[str, str] = {k.lower(): v for k, v in resp.headers.items()}

    def watch(self, stall: float) -> None:
        self._stall = stall
        self._last = self._loop.time()
        self._timer = self._loop.call_at(self._last + stall, self._check)

    def _check(self) -> None:
        now = self._loop.time()
        if not self._reading:  # busy writing to a slow client: not the provider's silence
            self._last = now
        due = self._last + self._stall
        if now < due:
            self._timer = self._loop.call_at(due, self._check)
            return
        self._timer = None
        self._stalled = True
        self._resp.close()

    def _stall_error(self) -> RequestTimeoutError:
        return RequestTimeoutError(
            f"The provider sent nothing for {self._stall:g} s.",
            code="stream_stalled",
            http_status=504,
        )

    async def read_chunk(self) -> bytes:
        self._reading = True
        self._last = self._loop.time()  # silence counts from when we start waiting
        try:
            data = await self._resp.content.readany()
        except (aiohttp.ClientError, TimeoutError, OSError) as exc:
            if self._stalled:
                raise self._stall_error() from None
            raise map_client_error(exc, connecting=False) from None
        finally:
            self._reading = False
        if self._stalled:
            raise self._stall_error()
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
        self._unwatch()
        self._resp.close()

    def release(self) -> None:
        self._unwatch()
        self._resp.release()


class LocalResponse:
    """Runs an in-process upstream's script: sleep, then hand over the bytes."""

    __slots__ = ("_script", "headers", "status")

    def __init__(self, script: Iterator[tuple[float, bytes]]) -> None:
        self._script = script
        self.status = 200
        self.headers: Mapping[str, str] = {}

    async def read_chunk(self) -> bytes:
        for pause, data in self._script:
            if pause > 0:
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
    """Sends :class:`UpstreamRequest` objects; one instance per gateway process."""

    def __init__(
        self, user_agent: str, clock: Callable[[], float], *, allow_private_upstreams: bool
    ) -> None:
        self._user_agent = user_agent
        self._clock = clock
        self._allow_private = allow_private_upstreams
        self._session: aiohttp.ClientSession | None = None
        self._guarded: aiohttp.ClientSession | None = None
        self._signer: AwsSigner | None = None

    def _new_session(self, connector: PoolConnector) -> aiohttp.ClientSession:
        return aiohttp.ClientSession(
            connector=connector,
            headers={"user-agent": self._user_agent},
            skip_auto_headers=("content-type",),
            timeout=aiohttp.ClientTimeout(total=None),
        )

    async def start(self) -> None:
        options: dict[str, Any] = {"limit": 0, "ttl_dns_cache": 300, "keepalive_timeout": 30}
        self._session = self._new_session(PoolConnector(**options))
        # accounts' own upstreams: checked addresses, and never the operator's pool
        self._guarded = self._new_session(
            guarded_connector(allow_private=self._allow_private, **options)
        )

    async def close(self) -> None:
        for session in (self._session, self._guarded):
            if session is not None:
                await session.close()
        self._session = self._guarded = None

    async def send(
        self, req: UpstreamRequest, timeouts: Timeouts, *, guarded: bool = False
    ) -> UpstreamResponse:
        """``guarded``: an account's own connection (SSRF checks, its own pool)."""
        if req.local is not None:
            return LocalResponse(req.local.script())
        session = self._guarded if guarded else self._session
        if session is None:
            raise RuntimeError("transport not started")
        headers = req.headers
        if req.aws_sigv4 is not None:
            if self._signer is None:
                self._signer = AwsSigner(self._clock)
            headers = await self._signer.sign(req, req.aws_sigv4)
        # first event and stall are enforced by the router and the response watchdog
        timeout = aiohttp.ClientTimeout(total=None, sock_connect=timeouts.connect)
        connector = session.connector
        assert isinstance(connector, PoolConnector)
        connector.reused.set(False)
        send = functools.partial(
            session.request,
            req.method,
            URL(req.url, encoded=True),  # sent exactly as built (and as signed)
            data=req.body,
            headers=headers,
            timeout=timeout,
            allow_redirects=False,
        )
        try:
            try:
                resp = await send()
            except (aiohttp.ServerDisconnectedError, aiohttp.ClientOSError) as exc:
                # a pooled connection the upstream closed as we reused it (it timed it
                # out): the request never reached it (RFC 9112 §9.3.1), so once more
                if not connector.reused.get() or isinstance(exc, aiohttp.ClientConnectorError):
                    raise
                resp = await send()
        except (TimeoutError, aiohttp.ClientError, OSError) as exc:
            raise map_client_error(exc, connecting=True) from None
        except RuntimeError:  # aiohttp: "Session is closed"
            if not session.closed:
                raise
            raise ServiceUnavailableError(
                "The gateway is shutting down.", code="shutting_down"
            ) from None
        return HttpResponse(resp)
