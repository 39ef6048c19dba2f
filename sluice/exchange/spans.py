"""What a request's span and its attempts' spans say, worked out from the request-log
row once the request settled: the OpenTelemetry GenAI semantic conventions
(``gen_ai.*``), the HTTP and server ones, and ``sluice.*`` for the rest.

Counts, names, outcomes and codes only: never a prompt, a completion, an error message
or a key (an upstream may quote any of them in a message).
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from urllib.parse import urlsplit

from sluice.routing.attempts import AttemptRecord
from sluice.storage.base import RequestRecord
from sluice.wire.chat import ChatRequest

Value = str | bool | int | float | list[str]
Attributes = dict[str, Value]

OPERATION = "chat"
"""``gen_ai.operation.name``: every front door's request is a chat."""
_DEFAULT_PORTS: Mapping[str, int] = MappingProxyType({"http": 80, "https": 443})


def span_name(model: str | None) -> str:
    """``{gen_ai.operation.name} {gen_ai.request.model}``."""
    return f"{OPERATION} {model}" if model else OPERATION


def _put(attrs: Attributes, name: str, value: Value | None) -> None:
    if value is not None:
        attrs[name] = value


def request_attributes(record: RequestRecord, req: ChatRequest) -> Attributes:
    """The request span's: what was asked, what served it, what it used and cost."""
    attrs: Attributes = {
        "gen_ai.operation.name": OPERATION,
        "gen_ai.request.model": req.model,
        "gen_ai.response.id": record.id,
        "sluice.request_id": record.id,
        "sluice.front_door": record.front_door,
        "sluice.status": record.status,
        "sluice.stream": record.stream,
        "http.response.status_code": record.http_status,
    }
    _put(attrs, "gen_ai.request.max_tokens", req.output_ceiling)
    temperature = req.temperature
    if isinstance(temperature, int | float):
        attrs["gen_ai.request.temperature"] = float(temperature)
    _put(attrs, "gen_ai.provider.name", record.provider)
    _put(attrs, "sluice.connection", record.connection)
    _put(attrs, "sluice.route", record.route)
    _put(attrs, "sluice.route_name", record.route_name)
    _put(attrs, "sluice.cost_usd", record.cost)
    _put(attrs, "sluice.disconnect", record.disconnect)
    if record.finish_reason is not None:
        attrs["gen_ai.response.finish_reasons"] = [record.finish_reason]
    attrs.update(usage_attributes(record))
    _put(attrs, "error.type", request_error(record))
    return attrs


def usage_attributes(record: RequestRecord) -> Attributes:
    """The served model and its token counts (the request log's); none if nothing served."""
    if record.served_model is None:
        return {}
    attrs: Attributes = {
        "gen_ai.response.model": record.served_model,
        "gen_ai.usage.input_tokens": record.prompt_tokens,
        "gen_ai.usage.output_tokens": record.completion_tokens,
    }
    if record.cached_tokens:
        attrs["gen_ai.usage.cache_read.input_tokens"] = record.cached_tokens
    return attrs


def request_error(record: RequestRecord) -> str | None:
    """``error.type``: the error's code (else its type), or the status of a 5xx that
    has neither; None when the request did not fail (a client leaving is no error)."""
    if record.error_code or record.error_type:
        return record.error_code or record.error_type
    return str(record.http_status) if record.http_status >= 500 else None


def attempt_attributes(attempt: AttemptRecord, base_url: str | None) -> Attributes:
    """One try's: the connection it went to, where that is, and how it ended."""
    attrs: Attributes = {
        "gen_ai.operation.name": OPERATION,
        "gen_ai.request.model": attempt.model,
        "gen_ai.provider.name": attempt.provider,
        "sluice.connection": attempt.connection,
        "sluice.attempt.position": attempt.position,
        "sluice.attempt.outcome": attempt.outcome,
        "sluice.attempt.latency_ms": attempt.latency_ms,
    }
    attrs.update(server_attributes(base_url))
    _put(attrs, "error.type", attempt_error(attempt))
    return attrs


def attempt_error(attempt: AttemptRecord) -> str | None:
    """The error code (else type) of a try that did not serve, None if it served."""
    return None if attempt.outcome == "served" else attempt.code or attempt.outcome


def server_attributes(base_url: str | None) -> Attributes:
    """``server.address`` and ``server.port`` of an http(s) upstream (the host only:
    never a path, a query or credentials); none for an in-process one."""
    if base_url is None:
        return {}
    try:
        url = urlsplit(base_url)
        port = url.port or _DEFAULT_PORTS.get(url.scheme)
    except ValueError:
        return {}
    if url.scheme not in _DEFAULT_PORTS or not url.hostname or port is None:
        return {}
    return {"server.address": url.hostname, "server.port": port}
