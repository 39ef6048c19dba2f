"""The async client: a thin aiohttp shell around :class:`ChatCall`.

aiohttp because the gateway already depends on it (no new dependency), it hands over
the body as bytes arrive (``readany``), and closing a response closes its connection,
which is what stops generation upstream. It is imported on first use, so importing
``sluice.client`` (for the replay harness, say) stays light.

Cancellation: leaving ``async with stream`` / ``await stream.aclose()`` or cancelling
the task that iterates closes the connection at once. (A bare ``break`` out of
``async for`` leaves that to the garbage collector, as for any async generator.)
"""

from __future__ import annotations

import asyncio
import contextlib
import random
import time
from collections.abc import AsyncGenerator, AsyncIterator, Awaitable, Callable, Sequence
from contextlib import aclosing
from types import TracebackType
from typing import TYPE_CHECKING, Any

from sluice.client.call import ChatCall
from sluice.client.events import StreamEvent, StreamItem, StreamResult
from sluice.client.policy import (
    DEFAULT_RETRY,
    DEFAULT_TIMEOUTS,
    STOP_TIMEOUT,
    RetryPolicy,
    Timeouts,
    Uniform,
)
from sluice.client.request import ChatSpec, PreparedRequest

if TYPE_CHECKING:
    import aiohttp


class AsyncChatClient:
    """Holds one connection pool; make many streams from it (``sluice bench`` does).
    ``clock``, ``wall``, ``uniform`` and ``sleep`` are injected for tests."""

    def __init__(
        self,
        base_url: str,
        api_key: str | None = None,
        *,
        timeouts: Timeouts = DEFAULT_TIMEOUTS,
        retry: RetryPolicy = DEFAULT_RETRY,
        headers: Sequence[tuple[str, str]] = (),
        clock: Callable[[], float] = time.monotonic,
        wall: Callable[[], float] = time.time,
        uniform: Uniform = random.uniform,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
    ) -> None:
        self.base_url, self.api_key, self.headers = base_url, api_key, tuple(headers)
        self.timeouts, self.retry = timeouts, retry
        self.clock, self.wall, self.uniform, self.sleep = clock, wall, uniform, sleep
        self._session: aiohttp.ClientSession | None = None

    def stream(
        self,
        model: str,
        messages: Sequence[Any],
        *,
        retry_model: str | None = None,
        resumable: bool = False,
        **request_fields: Any,
    ) -> AsyncChatStream:
        spec = ChatSpec(
            base_url=self.base_url,
            api_key=self.api_key,
            model=model,
            messages=messages,
            fields=request_fields,
            retry_model=retry_model,
            headers=self.headers,
            resumable=resumable,
        )
        return AsyncChatStream(self, spec)

    async def session(self) -> aiohttp.ClientSession:
        if self._session is None or self._session.closed:
            import aiohttp

            # No aiohttp timeouts: ChatCall's first-event/idle/total rule governs.
            unlimited = aiohttp.ClientTimeout(total=None)
            self._session = aiohttp.ClientSession(timeout=unlimited)
        return self._session

    async def aclose(self) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None

    async def __aenter__(self) -> AsyncChatClient:
        return self

    async def __aexit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.aclose()


class AsyncChatStream:
    """Iterate it for :data:`StreamItem` s: events, then one :class:`StreamResult`
    (also kept in ``result``; after an early close it says ``incomplete``)."""

    def __init__(self, client: AsyncChatClient, spec: ChatSpec, *, owns_client: bool = False):
        self._client = client
        self._spec = spec
        self._owns_client = owns_client
        self.result: StreamResult | None = None
        self._items = self._run()

    def __aiter__(self) -> AsyncIterator[StreamItem]:
        return self._items

    async def collect(self) -> StreamResult:
        """Read to the end; the result."""
        async for item in self._items:
            if isinstance(item, StreamResult):
                return item
        assert self.result is not None  # the generator always sets it
        return self.result

    def regenerate(self) -> AsyncChatStream:
        """The explicit retry after content was shown: the same request, from the start."""
        return AsyncChatStream(self._client, self._spec, owns_client=self._owns_client)

    async def aclose(self) -> None:
        await self._items.aclose()

    async def __aenter__(self) -> AsyncChatStream:
        return self

    async def __aexit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.aclose()

    async def _run(self) -> AsyncGenerator[StreamItem]:
        client = self._client
        call = ChatCall(self._spec, client.timeouts, client.retry, started=client.clock())
        try:
            while True:
                request: PreparedRequest | None = call.begin(client.clock())
                while request is not None:  # the attempt, then each resume of it
                    async with aclosing(self._attempt(call, request)) as events:
                        async for event in events:
                            yield event
                    request = call.resume()
                result = call.end(client.clock())
                delay = call.retry_delay(result, client.uniform)
                if delay is None:
                    break
                await client.sleep(delay)
            self.result = result
        finally:
            if self.result is None:
                self.result = call.cancel(client.clock())
            await self._stop(call)
            if self._owns_client:
                await client.aclose()
        yield result  # after the cleanup: a caller may stop reading here

    async def _attempt(
        self, call: ChatCall, request: PreparedRequest
    ) -> AsyncGenerator[StreamEvent]:
        import aiohttp

        client = self._client
        response: aiohttp.ClientResponse | None = None
        clean = False
        try:
            session = await client.session()
            async with asyncio.timeout(self._left(call)):
                response = await session.request(
                    request.method, request.url, data=request.body or None, headers=request.headers
                )
                if response.status != 200:
                    body = await response.read()
                    call.http_error(response.status, body, response.headers.get, client.wall())
                    return
            headers = response.headers
            call.opened(
                headers.get("Content-Type"),
                headers.get("X-Request-Id"),
                headers.get("X-Sluice-Resume-Url"),
            )
            while not call.finished:
                async with asyncio.timeout(self._left(call)):
                    data = await response.content.readany()
                if not data:
                    break
                for event in call.feed(data, client.clock()):
                    yield event
            clean = True
        except TimeoutError:
            call.timed_out(client.clock())
        except aiohttp.ClientError as exc:
            call.broken(str(exc) or type(exc).__name__)
        finally:
            if response is not None and clean:
                response.release()  # back to the pool, or closed if the body is unfinished
            elif response is not None:
                response.close()

    async def _stop(self, call: ChatCall) -> None:
        """Closed before its end: a resumable stream is stopped with ``DELETE`` (best
        effort, a few seconds at most; the gateway gives it up after its retention)."""
        request = call.stop_request()
        if request is None:
            return
        session = await self._client.session()
        with contextlib.suppress(Exception):
            async with asyncio.timeout(STOP_TIMEOUT):
                answer = await session.request(request.method, request.url, headers=request.headers)
                answer.release()

    def _left(self, call: ChatCall) -> float | None:
        """Seconds the next await may take; past the deadline, bytes already received
        are still read (``readany`` returns them without waiting)."""
        deadline = call.deadline()
        return None if deadline is None else max(0.0, deadline - self._client.clock())


def astream_chat(
    *,
    base_url: str,
    api_key: str | None,
    model: str,
    messages: Sequence[Any],
    timeouts: Timeouts = DEFAULT_TIMEOUTS,
    retry: RetryPolicy = DEFAULT_RETRY,
    retry_model: str | None = None,
    resumable: bool = False,
    **request_fields: Any,
) -> AsyncChatStream:
    """One streamed chat completion on a private connection pool, closed with the
    stream. For many calls, keep an :class:`AsyncChatClient`."""
    client = AsyncChatClient(base_url, api_key, timeouts=timeouts, retry=retry)
    spec = ChatSpec(
        base_url=base_url,
        api_key=api_key,
        model=model,
        messages=messages,
        fields=request_fields,
        retry_model=retry_model,
        resumable=resumable,
    )
    return AsyncChatStream(client, spec, owns_client=True)
