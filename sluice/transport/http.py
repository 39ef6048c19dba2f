"""The only place the HTTP client lives; its exceptions become our errors here, once.

:class:`HttpTransport` implements :class:`~sluice.transport.port.Transport` with one
pooled :class:`aiohttp.ClientSession` per gateway process. Redirects are never
followed (an upstream redirect is an upstream error, not a new destination).
In-process upstreams (:class:`~sluice.core.upstream_request.LocalUpstream`) are run by
:class:`LocalResponse` behind the same
:class:`~sluice.transport.port.UpstreamResponse` shape.
"""

from __future__ import annotations

import asyncio
import warnings
from collections.abc import Callable, Iterator, Mapping
from typing import TYPE_CHECKING, Any

import aiohttp
from yarl import URL

from sluice.core.connection import Timeouts
from sluice.core.upstream_request import UpstreamRequest
from sluice.errors import RequestTimeoutError, ShuttingDownError, UpstreamError
from sluice.transport.failures import (
    RequestNotSentError,
    deadline_error,
    log_failure,
    map_client_error,
)

if TYPE_CHECKING:
    from sluice.transport.aws_sigv4 import AwsSigner
from sluice.transport.guarded_resolver import guarded_connector, sized_socket_factory
from sluice.transport.pool import SENDING, PoolConnector, SendState, TrackedRequest
from sluice.transport.port import UpstreamResponse

_READ_BUFFER_BYTES = 64 * 1024
"""aiohttp stops reading an upstream once about twice this is buffered unread; one read
hands over at most this much (what one translation and one write then hold)."""
_WHOLE_BODY_BYTES = 1024 * 1024
"""aiohttp warns about request bodies larger than this (see :func:`_payload`)."""


def _payload(body: bytes) -> bytes | aiohttp.BytesPayload:
    """The body as aiohttp should send it: a large one without copying it (aiohttp warns
    that one write of it may block; under uvloop the kernel takes what fits and the
    rest waits in the transport, by reference)."""
    if len(body) <= _WHOLE_BODY_BYTES:
        return body
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ResourceWarning)
        return aiohttp.BytesPayload(body)


class HttpResponse:
    """An aiohttp response behind our shape, with a cheap watchdog for the stall and
    the total deadline.

    The watchdog is one timer per response: each read only notes when it started
    waiting, and the timer re-arms itself from there instead of being reset per chunk.
    Silence only counts while a read is waiting: time the gateway spends blocked on a
    slow client is not the provider's. The total deadline counts all the time.
    """

    __slots__ = (
        "_cut",
        "_deadline",
        "_last",
        "_loop",
        "_reading",
        "_resp",
        "_stall",
        "_timer",
        "_total",
        "headers",
        "status",
    )

    def __init__(self, resp: aiohttp.ClientResponse, sent_at: float, total: float) -> None:
        self._resp = resp
        self._loop = asyncio.get_running_loop()
        self._total = total
        self._deadline = sent_at + total
        self._stall = 0.0
        self._last = 0.0
        self._cut: RequestTimeoutError | None = None  # why the watchdog closed the body
        self._reading = False
        self._timer: asyncio.TimerHandle | None = self._loop.call_at(self._deadline, self._check)
        self.status = resp.status
        self.headers: Mapping[str, str] = {k.lower(): v for k, v in resp.headers.items()}

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
        self._resp.close()

    async def read_chunk(self) -> bytes:
        self._reading = True
        self._last = self._loop.time()  # silence counts from when we start waiting
        try:
            data = await self._resp.content.read(_READ_BUFFER_BYTES)
        except (aiohttp.ClientError, TimeoutError, OSError) as exc:
            if self._cut is not None:
                raise self._cut from None
            raise map_client_error(exc, connecting=False) from None
        finally:
            self._reading = False
        if self._cut is not None:
            raise self._cut
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

    Four sessions: the operator's upstreams and accounts' own (guarded: checked
    addresses, never the operator's pool), each pooled, and each once more without
    reuse for a resend, which must go out on a fresh connection.
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
        self._sessions: dict[tuple[bool, bool], aiohttp.ClientSession] = {}
        """(guarded, fresh) -> session."""
        self._signer: AwsSigner | None = None

    def _new_session(self, connector: aiohttp.TCPConnector) -> aiohttp.ClientSession:
        return aiohttp.ClientSession(
            connector=connector,
            headers={"user-agent": self._user_agent},
            skip_auto_headers=("content-type",),
            timeout=aiohttp.ClientTimeout(total=None),
            request_class=TrackedRequest,
            read_bufsize=_READ_BUFFER_BYTES,
        )

    async def start(self) -> None:
        options: dict[str, Any] = {"limit": 0, "ttl_dns_cache": 300, "keepalive_timeout": 30}
        size = self._receive_buffer
        for fresh in (False, True):
            pool: dict[str, Any] = {"force_close": True} if fresh else options
            self._sessions[False, fresh] = self._new_session(
                PoolConnector(socket_factory=sized_socket_factory(size), **pool)
            )
            self._sessions[True, fresh] = self._new_session(
                guarded_connector(allow_private=self._allow_private, receive_buffer=size, **pool)
            )

    async def close(self) -> None:
        sessions, self._sessions = self._sessions, {}
        for session in sessions.values():
            await session.close()

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
        session = self._sessions.get((guarded, fresh))
        if session is None:
            raise ShuttingDownError()
        headers = req.headers
        if req.aws_sigv4 is not None:
            if self._signer is None:
                self._signer = aws_signer(self._clock)
            headers = await self._signer.sign(req, req.aws_sigv4)
        # first event and stall are enforced by the router and the response watchdog
        timeout = aiohttp.ClientTimeout(total=None, sock_connect=timeouts.connect)
        connector = session.connector
        assert isinstance(connector, PoolConnector)
        connector.reused.set(False)
        state = SendState()
        SENDING.set(state)
        try:
            resp = await session.request(
                req.method,
                URL(req.url, encoded=True),  # sent exactly as built (and as signed)
                data=_payload(req.body),
                headers=headers,
                timeout=timeout,
                allow_redirects=False,
            )
        except (aiohttp.ServerDisconnectedError, aiohttp.ClientOSError) as exc:
            if (
                connector.reused.get()
                and not state.written
                and not isinstance(exc, aiohttp.ClientConnectorError)
            ):
                raise RequestNotSentError() from None
            log_failure(req.url, exc)
            raise map_client_error(exc, connecting=True) from None
        except (TimeoutError, aiohttp.ClientError, OSError) as exc:
            log_failure(req.url, exc)
            raise map_client_error(exc, connecting=True) from None
        except RuntimeError:  # aiohttp: "Session is closed"
            if not session.closed:
                raise
            raise ShuttingDownError() from None
        return HttpResponse(resp, sent_at, timeouts.total)


AWS_EXTRA_MISSING = (
    "This connection signs its requests for AWS, which needs the aws extra: "
    "pip install 'sluice[aws]' (botocore: SigV4 and the AWS credential chain)."
)


def aws_signer(clock: Callable[[], float]) -> AwsSigner:
    """The SigV4 signer, imported when a connection first needs it (botocore is the
    ``aws`` extra); without it the request fails naming the extra."""
    try:
        from sluice.transport.aws_sigv4 import AwsSigner
    except ImportError:
        raise UpstreamError(AWS_EXTRA_MISSING, code="upstream_misconfigured") from None
    return AwsSigner(clock)
