"""One request to one upstream connection, as the router makes it.

An attempt's stream is sent and read to its first event
(:meth:`UpstreamCaller.open_stream`), an attempt's whole answer is read and parsed
(:meth:`UpstreamCaller.complete`), an embeddings request's batches are sent and joined
(:meth:`UpstreamCaller.embed`), a provider is asked for its own count of a prompt
(:meth:`UpstreamCaller.count_tokens`): each within its connection's timeouts, through
the provider's adapter, a refusal parsed into our error tree and scrubbed of the
request's credentials. Which connection to try, and what a failure means for the next,
is the router's (:mod:`sluice.routing.router`).
"""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine, Mapping, Sequence
from functools import partial
from typing import Any, Protocol, TypeVar

import msgspec

from sluice.core.connection import Target, Timeouts
from sluice.core.embedding import EmbedCall, Embedded
from sluice.core.upstream_request import UpstreamRequest
from sluice.errors import ApiError, InvalidRequestError, RequestTimeoutError, UpstreamError
from sluice.providers.base import Adapter, EmbedBatch, ParsedCompletion
from sluice.providers.errors import error_for_status, malformed_response, retry_after_seconds
from sluice.providers.normalize import canonical_choices
from sluice.providers.registry import Abilities, AdapterRegistry
from sluice.routing.plan import Attempt
from sluice.routing.upstream import UpstreamStream
from sluice.transport.failures import deadline_error, log_refusal
from sluice.transport.port import Transport, UpstreamResponse
from sluice.wire.chat import ChatRequest

_T = TypeVar("_T")


class Scrub(Protocol):
    """An attempt's error on ``target``, with its credentials taken out
    (:meth:`sluice.routing.router.Router.scrub`)."""

    def __call__(self, err: ApiError, target: Target) -> ApiError: ...


class Completed(msgspec.Struct):
    attempt: Attempt
    result: ParsedCompletion


class Embeddings(msgspec.Struct):
    attempt: Attempt
    result: Embedded


def first_event_timeout(timeouts: Timeouts, what: str) -> RequestTimeoutError:
    """The error when nothing came within ``first_event`` seconds, or within ``total``
    when that is shorter (both fail over: the client has seen nothing)."""
    if timeouts.total < timeouts.first_event:
        return deadline_error(timeouts.total)
    return RequestTimeoutError(
        f"The provider {what} within {timeouts.first_event:g} s.",
        code="first_event_timeout",
        http_status=504,
    )


class UpstreamCaller:
    def __init__(
        self,
        *,
        registry: AdapterRegistry,
        transport: Transport,
        scrub: Scrub,
        error_body_bytes: int,
        body_bytes: int,
    ) -> None:
        self._registry = registry
        self._transport = transport
        self._scrub = scrub
        self._error_body_bytes = error_body_bytes
        self._body_bytes = body_bytes

    async def open_stream(
        self, req: ChatRequest, attempt: Attempt, fresh: bool, extra: Mapping[str, str]
    ) -> UpstreamStream:
        """Send, then read until the first event the client must see (or the end), within
        the connection's first-event timeout."""
        target = attempt.target
        timeouts = target.connection.timeouts
        translator = self._registry.adapter(target.connection.provider).stream(req)
        stream: UpstreamStream | None = None
        try:
            async with asyncio.timeout(min(timeouts.first_event, timeouts.total)):
                resp = await self._send(req, attempt, fresh, extra)
                stream = UpstreamStream(
                    attempt, resp, translator, partial(self._scrub, target=target)
                )
                await stream.open(timeouts.stall)
        except TimeoutError:
            if stream is not None:
                stream.close()
            raise first_event_timeout(timeouts, "sent nothing") from None
        except BaseException:
            if stream is not None:
                stream.close()
            raise
        return stream

    async def complete(
        self, req: ChatRequest, attempt: Attempt, fresh: bool, extra: Mapping[str, str]
    ) -> Completed:
        timeouts = attempt.target.connection.timeouts
        adapter = self._registry.adapter(attempt.target.connection.provider)
        try:
            async with asyncio.timeout(min(timeouts.first_event, timeouts.total)):
                resp = await self._send(req, attempt, fresh, extra)
        except TimeoutError:
            raise first_event_timeout(timeouts, "did not answer") from None
        resp.watch(timeouts.stall)
        try:
            body = await resp.read_body(self._body_bytes + 1)
        except BaseException:
            resp.close()
            raise
        if len(body) > self._body_bytes:
            resp.close()
            raise UpstreamError(
                f"The provider's answer is larger than {self._body_bytes} bytes.",
                code="upstream_response_too_large",
            )
        resp.release()
        if not body:
            raise UpstreamError("The provider sent an empty response.", code="upstream_empty")
        try:
            parsed = adapter.parse_response(resp.status, resp.headers, body)
        except RecursionError:
            raise malformed_response() from None
        choices, repairs = canonical_choices(parsed.choices, req.choice_count)
        return Completed(attempt, ParsedCompletion(choices, parsed.usage, repairs))

    async def count_tokens(self, req: ChatRequest, target: Target) -> int | None:
        """The provider's own count of the prompt, if its adapter counts tokens and it
        answers in time; None otherwise."""
        conn = target.connection
        counter = self._registry.abilities(conn.provider).counts_tokens
        if counter is None:
            return None
        upstream = counter.count_request(req, target)
        try:
            async with asyncio.timeout(min(conn.timeouts.first_event, conn.timeouts.total)):
                resp = await self._transport.send(
                    upstream, conn.timeouts, guarded=conn.owner is not None, fresh=False
                )
                try:
                    body = await resp.read_body(self._error_body_bytes)
                finally:
                    resp.close()
            return counter.parse_count(body) if resp.status < 300 else None
        except (ApiError, TimeoutError):
            return None

    async def embed(
        self, call: EmbedCall, attempt: Attempt, fresh: bool, extra: Mapping[str, str]
    ) -> Embedded:
        """Every batch the provider's adapter splits ``call`` into, at most its
        ``embed_concurrency`` at once, joined in input order; the first batch to fail
        stops the others and is the attempt's error (nothing of it is kept)."""
        abilities = self._registry.abilities(attempt.target.connection.provider)
        embedder = abilities.embeds_text
        if embedder is None:
            raise InvalidRequestError(
                f"The model '{attempt.target.model_id}' is served by a provider that "
                "cannot embed text.",
                code="embeddings_unsupported",
                param="model",
            )
        batches = embedder.embed_batches(call, attempt.target)
        bound = asyncio.Semaphore(embedder.embed_concurrency)

        async def one(batch: EmbedBatch) -> Embedded:
            async with bound:
                return await self._embed_batch(abilities, batch, attempt, fresh, extra)

        parts = await _all_or_none([one(b) for b in batches])
        counts = [p.prompt_tokens for p in parts]
        return Embedded(
            vectors=[v for p in parts for v in p.vectors],
            prompt_tokens=None if None in counts else sum(c or 0 for c in counts),
        )

    async def _embed_batch(
        self,
        abilities: Abilities,
        batch: EmbedBatch,
        attempt: Attempt,
        fresh: bool,
        extra: Mapping[str, str],
    ) -> Embedded:
        timeouts = attempt.target.connection.timeouts
        try:
            async with asyncio.timeout(min(timeouts.first_event, timeouts.total)):
                resp = await self._deliver(abilities.adapter, batch.request, attempt, fresh, extra)
        except TimeoutError:
            raise first_event_timeout(timeouts, "did not answer") from None
        resp.watch(timeouts.stall)
        try:
            body = await resp.read_body(self._body_bytes + 1)
        finally:
            resp.close()
        if len(body) > self._body_bytes:
            raise UpstreamError(
                f"The provider's answer is larger than {self._body_bytes} bytes.",
                code="upstream_response_too_large",
            )
        embedder = abilities.embeds_text
        assert embedder is not None
        try:
            return embedder.parse_embeddings(resp.headers, body, batch)
        except RecursionError:
            raise malformed_response() from None

    async def _send(
        self, req: ChatRequest, attempt: Attempt, fresh: bool, extra: Mapping[str, str]
    ) -> UpstreamResponse:
        adapter = self._registry.adapter(attempt.target.connection.provider)
        # a cap above the model's own is lowered to it, each target to its own limit
        upstream = adapter.build_request(
            req.capped(attempt.model.max_output_tokens), attempt.target
        )
        return await self._deliver(adapter, upstream, attempt, fresh, extra)

    async def _deliver(
        self,
        adapter: Adapter,
        upstream: UpstreamRequest,
        attempt: Attempt,
        fresh: bool,
        extra: Mapping[str, str],
    ) -> UpstreamResponse:
        """Send ``upstream`` on the attempt's connection; a refusal is parsed by
        ``adapter`` and raised."""
        target = attempt.target
        if extra:
            upstream.headers.update(extra)
        conn = target.connection
        resp = await self._transport.send(
            upstream, conn.timeouts, guarded=conn.owner is not None, fresh=fresh
        )
        if resp.status >= 300:
            try:
                body = await resp.read_body(self._error_body_bytes)
            finally:
                resp.close()
            try:
                err = adapter.parse_error(resp.status, resp.headers, body)
            except RecursionError:  # nested too deep to read: the status still tells
                err = error_for_status(
                    resp.status, None, retry_after=retry_after_seconds(resp.headers)
                )
            log_refusal(upstream.url, resp.status, self._scrub(err, target))
            raise err
        return resp


async def _all_or_none(work: Sequence[Coroutine[Any, Any, _T]]) -> list[_T]:
    """Every result in order, or the first failure with the rest cancelled."""
    tasks = [asyncio.ensure_future(w) for w in work]
    try:
        await asyncio.wait(tasks, return_when=asyncio.FIRST_EXCEPTION)
    finally:  # a failure, or this call cancelled: nothing is left running
        for task in tasks:
            task.cancel()
    errors = [t.exception() for t in tasks if t.done() and not t.cancelled()]
    first = next((e for e in errors if e is not None), None)  # each one seen: none logged
    if first is not None:
        raise first
    return [t.result() for t in tasks]
