"""The response object a Responses answer carries (whole, and in its stream's
``response.*`` events): its id, what it echoes of the request, its usage, its end."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from types import MappingProxyType

import msgspec

from sluice.core.tally import Tally
from sluice.errors import ApiError
from sluice.frontdoors.responses.echo import Echo
from sluice.frontdoors.responses.tools import custom_input
from sluice.wire.encode import StreamIdentity
from sluice.wire.responses import (
    ErrorInfo,
    IncompleteDetails,
    InputTokensDetails,
    OutCustomCall,
    OutFunctionCall,
    OutItem,
    OutputTokensDetails,
    Response,
    Usage,
)

_ENCODER = msgspec.json.Encoder()
_INCOMPLETE = MappingProxyType({"length": "max_output_tokens", "content_filter": "content_filter"})
"""Finish reasons that make a response ``incomplete``, and the reason it gives."""


def response_usage(tally: Tally | None) -> Usage | None:
    if tally is None:
        return None
    usage = tally.usage
    out = Usage(
        input_tokens=usage.prompt_tokens,
        input_tokens_details=InputTokensDetails(
            usage.prompt_tokens_details.cached_tokens, tally.cache_write_tokens
        ),
        output_tokens=usage.completion_tokens,
        output_tokens_details=OutputTokensDetails(usage.completion_tokens_details.reasoning_tokens),
        total_tokens=usage.prompt_tokens + usage.completion_tokens,
        cost=usage.cost,
        price_source=usage.price_source,
    )
    if tally.credits_used is not None:
        out.credits_used = tally.credits_used
    return out


WallClock = Callable[[], float]
"""Unix seconds now (``completed_at``)."""


def completed_at(clock: WallClock | None, identity: StreamIdentity) -> int:
    """When the response completed: the wall clock's second (without one, its start)."""
    return identity.created if clock is None else max(int(clock()), identity.created)


def response_id(identity: StreamIdentity) -> str:
    """``resp_`` and the request's id after its prefix: the log entry is the same id."""
    return "resp_" + identity.id.partition("_")[2]


def response_object(
    identity: StreamIdentity, echo: Echo, status: str, output: list[OutItem]
) -> Response:
    return Response(
        id=response_id(identity),
        created_at=identity.created,
        status=status,
        instructions=echo.instructions,
        max_output_tokens=echo.max_output_tokens,
        model=identity.model,
        output=output,
        parallel_tool_calls=echo.parallel_tool_calls,
        previous_response_id=echo.previous_response_id,
        reasoning=echo.reasoning,
        store=echo.store,
        background=echo.background,
        temperature=echo.temperature,
        text=echo.text,
        tool_choice=echo.tool_choice,
        tools=echo.tools,
        top_p=echo.top_p,
        user=echo.user,
        metadata=echo.metadata,
        prompt_cache_key=echo.prompt_cache_key,
        provider=identity.provider,
        connection=identity.connection,
        route=identity.route,
        route_name=identity.route_name,
    )


def settle(response: Response, finish: str | None, tally: Tally | None, now: int) -> None:
    """The response at its end: completed, or incomplete with the reason."""
    reason = _INCOMPLETE.get(finish or "")
    response.status = "completed" if reason is None else "incomplete"
    response.incomplete_details = None if reason is None else IncompleteDetails(reason)
    response.completed_at = now
    response.usage = response_usage(tally)


def failed(response: Response, err: ApiError, tally: Tally | None) -> Response:
    response.status = "failed"
    response.error = ErrorInfo(err.code or err.type, err.message)
    response.usage = response_usage(tally)
    return response


def event(kind: str, payload: Mapping[str, object]) -> bytes:
    body = _ENCODER.encode({"type": kind, **payload})
    return b"event: " + kind.encode() + b"\ndata: " + body + b"\n\n"


def call_item(
    echo: Echo, item_id: str, call_id: str, flat: str, arguments: str, *, status: str
) -> OutFunctionCall | OutCustomCall:
    """A tool call as its item: a custom tool's call carries its free-form input (once
    completed), a namespaced tool's its namespace and own name."""
    namespace, name = echo.names.split(flat)
    if echo.names.is_custom(flat):
        text = custom_input(arguments) if status == "completed" else ""
        return OutCustomCall(
            id=item_id, call_id=call_id, name=name, input=text, status=status, namespace=namespace
        )
    return OutFunctionCall(
        id=item_id,
        call_id=call_id,
        name=name,
        arguments=arguments,
        status=status,
        namespace=namespace,
    )
