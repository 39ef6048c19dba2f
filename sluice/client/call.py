"""One logical call, every attempt of it, as a pure state machine.

The IO shells (:mod:`sluice.client.aio`, :mod:`sluice.client.sync`) run the same loop
around it, each with its own HTTP client::

    call = ChatCall(spec, timeouts, retry, started=clock())
    while True:
        req = call.begin(clock())                  # the attempt's URL, headers, body
        ... send; on a non-200: call.http_error(…); else call.opened(…) and, until
        ... call.finished, read with the deadline call.deadline() and yield
        ... call.feed(data, clock()); on a timeout call.timed_out(clock()), on a
        ... transport failure call.broken(message)
        result = call.end(clock())
        delay = call.retry_delay(result, uniform)
        if delay is None: return result
        sleep(delay)
"""

from __future__ import annotations

from collections.abc import Callable

from sluice.client.accumulator import StreamAccumulator
from sluice.client.events import ErrorInfo, StreamEvent, StreamResult
from sluice.client.policy import RetryPolicy, Timeouts, Uniform
from sluice.client.request import (
    ChatSpec,
    PreparedRequest,
    error_from_response,
    not_an_event_stream,
    prepare,
    stream_request,
)

CANCELLED = ErrorInfo("cancelled", "the consumer closed the stream", "client_closed")


class ChatCall:
    def __init__(
        self, spec: ChatSpec, timeouts: Timeouts, retry: RetryPolicy, *, started: float
    ) -> None:
        self._spec = spec
        self._timeouts = timeouts
        self._retry = retry
        self._started = started
        self._attempt_started = started
        self.attempt = 0
        self._acc = StreamAccumulator(started)
        self._broken: ErrorInfo | None = None
        self._opened = False
        self._model = spec.model
        self.resume_url: str | None = None
        """A resumable stream's (``X-Sluice-Resume-Url``), once it answered."""

    def begin(self, at: float) -> PreparedRequest:
        self.attempt += 1
        self._attempt_started = at
        request = prepare(self._spec, self.attempt)
        self._acc = StreamAccumulator(self._started, attempt=self.attempt, model=request.model)
        self._opened = False
        self._model = request.model
        self.resume_url = None
        return request

    def resume(self) -> PreparedRequest | None:
        """After an attempt's connection ended: the reconnect of a resumable stream cut
        before its end (within ``max_resumes``), else None. The answer so far is kept."""
        acc, last = self._acc, self._acc.last_event_id
        if self.resume_url is None or last is None or acc.finished:
            return None
        if acc.resumes >= self._retry.max_resumes:
            return None
        acc.reconnect()
        self._broken = None
        return stream_request(self._spec, self.resume_url, self._model, last)

    def stop_request(self) -> PreparedRequest | None:
        """``DELETE`` of a resumable stream given up before its end (closed by the
        consumer, timed out, out of resumes): closing the connection alone would leave
        it running, and charged, for a reconnect that will not come."""
        if self.resume_url is None or self._acc.ended_on_wire:
            return None
        return stream_request(self._spec, self.resume_url, self._model)

    def http_error(
        self, status: int, body: bytes, headers: Callable[[str], str | None], now: float
    ) -> None:
        """A non-200 answer; ``headers`` looks one up by name, ``now`` is wall-clock unix
        time (for a dated Retry-After)."""
        self._acc.open(headers("X-Request-Id"))
        retry_after = headers("Retry-After")
        self._acc.fail(error_from_response(status, body, retry_after, now))

    def opened(
        self, content_type: str | None, request_id: str | None, resume_url: str | None = None
    ) -> None:
        self._opened = True
        if self._acc.resumes:  # a reconnect: the stream's request id stays the first one's
            request_id = self._acc.request_id
        elif resume_url and resume_url.startswith("/"):
            self.resume_url = resume_url
        self._acc.open(request_id)
        wrong = not_an_event_stream(content_type)
        if wrong is not None:
            self._acc.fail(wrong)

    def feed(self, data: bytes, at: float) -> list[StreamEvent]:
        return self._acc.feed(data, at)

    @property
    def finished(self) -> bool:
        return self._acc.finished

    def deadline(self) -> float | None:
        """When the read in progress times out: the first event's limit (counted from
        sending the request) until one arrived, then the idle limit after the latest;
        never later than the total deadline."""
        last = self._acc.last_event_at
        limit, since = (
            (self._timeouts.first_event, self._attempt_started)
            if last is None
            else (self._timeouts.idle, last)
        )
        times = [since + limit] if limit is not None else []
        if self._timeouts.total is not None:
            times.append(self._started + self._timeouts.total)
        return min(times) if times else None

    def timed_out(self, at: float) -> None:
        total = self._timeouts.total
        limit: float | None
        if total is not None and at >= self._started + total:
            code, limit = "deadline_exceeded", total
        elif self._acc.last_event_at is None:
            code, limit = "first_event_timeout", self._timeouts.first_event
        else:
            code, limit = "idle_timeout", self._timeouts.idle
        self._acc.fail(ErrorInfo("request_timeout", f"no event within {limit} s", code))

    def broken(self, message: str) -> None:
        """The connection failed: before a 200 arrived (refused, reset) that is an
        ``error``; once the stream was open, an ``incomplete`` stream."""
        error = ErrorInfo("connection_error", message, "connection_failed")
        if self._opened:
            self._broken = error
        else:
            self._acc.fail(error)

    def end(self, at: float) -> StreamResult:
        cause, self._broken = self._broken, None
        return self._acc.finish(at, cause)

    def cancel(self, at: float) -> StreamResult:
        """The consumer closed the stream or cancelled its task: ``incomplete``."""
        return self._acc.finish(at, CANCELLED)

    def retry_delay(self, result: StreamResult, uniform: Uniform) -> float | None:
        """Seconds before the next attempt, or ``None`` when ``result`` is final."""
        if result.ok or result.error is None:
            return None
        spec, attempt = self._spec, self.attempt
        same = spec.model_for(attempt + 1) == spec.model_for(attempt)
        delay = self._retry.delay(
            attempt, result.error, self._acc.content_seen, uniform, same_model=same
        )
        total = self._timeouts.total
        if delay is not None and total is not None and result.duration + delay >= total:
            return None  # the retry could not even start before the deadline
        return delay
