"""The sync client: a thin ``http.client`` shell around the same :class:`ChatCall`.

The standard library's ``http.client`` because it streams a chunked body
(``read1`` returns what has arrived), lets each read carry its own socket timeout
(how the first-event and idle limits are enforced) and costs no dependency. No
connection pool and no proxy support: one connection per attempt, closed with it.

Cancellation: leaving ``with stream``, ``stream.close()`` or a ``KeyboardInterrupt``
during a read closes the socket at once.
"""

from __future__ import annotations

import contextlib
import http.client
import random
import time
from collections.abc import Callable, Generator, Iterator, Sequence
from types import TracebackType
from typing import Any
from urllib.parse import urlsplit

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

_READ_SIZE = 65536
_POLL = 0.001


class ChatClient:
    """Settings shared by many streams; ``clock``, ``wall``, ``uniform`` and ``sleep``
    are injected for tests."""

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
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self.base_url, self.api_key, self.headers = base_url, api_key, tuple(headers)
        self.timeouts, self.retry = timeouts, retry
        self.clock, self.wall, self.uniform, self.sleep = clock, wall, uniform, sleep

    def stream(
        self,
        model: str,
        messages: Sequence[Any],
        *,
        retry_model: str | None = None,
        resumable: bool = False,
        **request_fields: Any,
    ) -> ChatStream:
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
        return ChatStream(self, spec)


class ChatStream:
    """Iterate it for :data:`StreamItem` s: events, then one :class:`StreamResult`
    (also kept in ``result``; after an early close it says ``incomplete``)."""

    def __init__(self, client: ChatClient, spec: ChatSpec) -> None:
        self._client = client
        self._spec = spec
        self.result: StreamResult | None = None
        self._items = self._run()

    def __iter__(self) -> Iterator[StreamItem]:
        return self._items

    def collect(self) -> StreamResult:
        """Read to the end; the result."""
        for item in self._items:
            if isinstance(item, StreamResult):
                return item
        assert self.result is not None  # the generator always sets it
        return self.result

    def regenerate(self) -> ChatStream:
        """The explicit retry after content was shown: the same request, from the start."""
        return ChatStream(self._client, self._spec)

    def close(self) -> None:
        self._items.close()

    def __enter__(self) -> ChatStream:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    def _run(self) -> Generator[StreamItem]:
        client = self._client
        call = ChatCall(self._spec, client.timeouts, client.retry, started=client.clock())
        try:
            while True:
                request: PreparedRequest | None = call.begin(client.clock())
                while request is not None:  # the attempt, then each resume of it
                    yield from self._attempt(call, request)
                    request = call.resume()
                result = call.end(client.clock())
                delay = call.retry_delay(result, client.uniform)
                if delay is None:
                    break
                client.sleep(delay)
            self.result = result
        finally:
            if self.result is None:
                self.result = call.cancel(client.clock())
            self._stop(call)
        yield result

    def _attempt(self, call: ChatCall, request: PreparedRequest) -> Generator[StreamEvent]:
        client = self._client
        conn: http.client.HTTPConnection | None = None
        try:
            conn = _connection(request.url, self._left(call))
            target = urlsplit(request.url)
            path = target.path + (f"?{target.query}" if target.query else "")
            body = request.body or None
            conn.request(request.method, path, body=body, headers=dict(request.headers))
            response = conn.getresponse()
            if response.status != 200:
                self._settimeout(conn, call)
                body = response.read()
                call.http_error(response.status, body, response.getheader, client.wall())
                return
            call.opened(
                response.getheader("Content-Type"),
                response.getheader("X-Request-Id"),
                response.getheader("X-Sluice-Resume-Url"),
            )
            while not call.finished:
                self._settimeout(conn, call)
                data = response.read1(_READ_SIZE)
                if not data:
                    break
                yield from call.feed(data, client.clock())
        except TimeoutError:
            call.timed_out(client.clock())
        except (OSError, http.client.HTTPException) as exc:
            call.broken(str(exc) or type(exc).__name__)
        finally:
            if conn is not None:
                conn.close()

    def _stop(self, call: ChatCall) -> None:
        """Closed before its end: a resumable stream is stopped with ``DELETE`` (best
        effort; the gateway gives it up after its retention otherwise)."""
        request = call.stop_request()
        if request is None:
            return
        target = urlsplit(request.url)
        with contextlib.suppress(OSError, http.client.HTTPException):
            conn = _connection(request.url, STOP_TIMEOUT)
            try:
                conn.request(request.method, target.path, headers=dict(request.headers))
                conn.getresponse().read()
            finally:
                conn.close()

    def _left(self, call: ChatCall) -> float | None:
        """The socket timeout for the next read. Past the deadline it still reads what
        has already arrived (a slow consumer is not the server's silence), hence a
        short poll rather than 0, which would make the socket non-blocking."""
        deadline = call.deadline()
        return None if deadline is None else max(_POLL, deadline - self._client.clock())

    def _settimeout(self, conn: http.client.HTTPConnection, call: ChatCall) -> None:
        if conn.sock is not None:
            conn.sock.settimeout(self._left(call))


def _connection(url: str, timeout: float | None) -> http.client.HTTPConnection:
    target = urlsplit(url)
    if target.scheme == "https":
        return http.client.HTTPSConnection(target.hostname or "", target.port, timeout=timeout)
    if target.scheme == "http":
        return http.client.HTTPConnection(target.hostname or "", target.port, timeout=timeout)
    raise ValueError(f"not an http(s) URL: {url!r}")


def stream_chat(
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
) -> ChatStream:
    """One streamed chat completion, blocking; see :func:`sluice.client.astream_chat`."""
    client = ChatClient(base_url, api_key, timeouts=timeouts, retry=retry)
    return client.stream(
        model, messages, retry_model=retry_model, resumable=resumable, **request_fields
    )
