"""The one place where errors become wire bytes.

Chat completions, before the stream: ``{"error": {"message", "type", "code",
"param"}}`` with the error's HTTP status. Mid-stream: one ``data:`` event ``{"error":
{"message", "type", "code"}}`` (plus the partial ``usage`` when the client asked).

Messages: ``{"type": "error", "error": {"type", "message", "code", "param"}}`` with the
same status; ``type`` is the Messages type of that status (:func:`messages_error_type`:
402 ``billing_error``, 503 ``overloaded_error``, 408 and 504 ``timeout_error``, …) and
``code``/``param`` are ours. Mid-stream: ``event: error`` with that body, and the partial
usage.
"""

from __future__ import annotations

import re
from typing import TypeVar

import msgspec

from sluice.errors import ApiError, InvalidRequestError
from sluice.wire.bounds import DEFAULT_MAX_JSON_VALUES, json_bounds_problem
from sluice.wire.chunks import Usage
from sluice.wire.messages import ErrorDetails, ErrorEvent, ErrorObject
from sluice.wire.messages import Usage as MessagesUsage
from sluice.wire.sse import data_event

_T = TypeVar("_T")


class ErrorBody(msgspec.Struct):
    message: str
    type: str
    code: str | None
    param: str | None = None


class ErrorEnvelope(msgspec.Struct):
    error: ErrorBody


class StreamErrorBody(msgspec.Struct):
    message: str
    type: str
    code: str | None


class StreamErrorEvent(msgspec.Struct):
    error: StreamErrorBody
    usage: Usage | msgspec.UnsetType = msgspec.UNSET


_ENCODER = msgspec.json.Encoder()


def error_json(err: ApiError) -> bytes:
    """The HTTP body for an error answered before the stream started."""
    body = ErrorBody(err.message, err.type, err.code, err.param)
    return _ENCODER.encode(ErrorEnvelope(body))


def error_event(err: ApiError, usage: Usage | None = None) -> bytes:
    """The SSE event that ends a stream that already started."""
    event = StreamErrorEvent(StreamErrorBody(err.message, err.type, err.code))
    if usage is not None:
        event.usage = usage
    return data_event(_ENCODER.encode(event))


_PATH = re.compile(r" - at `\$\.?(?P<path>[^`]*)`$")
_TYPE_ONLY = re.compile(r"^Expected `[^`]+`, got `[^`]+`$")
_MISSING = re.compile(r"^Object missing required field `(?P<field>[^`]+)`")
_UNKNOWN = re.compile(r"^Object contains unknown field `(?P<field>[^`]*)`$")


def decode_body(decoder: msgspec.json.Decoder[_T], body: bytes | bytearray, max_depth: int) -> _T:
    """A client's JSON body as ``decoder``'s type; 400 naming what is wrong, and naming
    the limit when it nests deeper than ``max_depth`` or holds more values than a body
    may (checked before decoding)."""
    if not body:
        raise invalid_body_error(msgspec.DecodeError("input data was truncated"))
    problem = json_bounds_problem(body, max_depth)
    if problem == "depth":
        raise InvalidRequestError(
            f"The request body nests arrays and objects deeper than {max_depth} levels.",
            code="json_too_deep",
        )
    if problem == "values":
        raise InvalidRequestError(
            f"The request body holds more than {DEFAULT_MAX_JSON_VALUES:,} JSON values.",
            code="json_too_large",
        )
    try:
        return decoder.decode(body)
    except msgspec.DecodeError as exc:
        raise invalid_body_error(exc) from None


def invalid_body_error(exc: msgspec.DecodeError) -> InvalidRequestError:
    """Turn msgspec's decode/validation message into our error with a ``param``."""
    text = str(exc)
    if not isinstance(exc, msgspec.ValidationError):
        return InvalidRequestError(
            f"The request body is not valid JSON: {text}", code="invalid_json"
        )
    param: str | None = None
    match = _PATH.search(text)
    message = text[: match.start()] if match else text
    if match:
        param = match.group("path") or None
    unknown = _UNKNOWN.match(text)  # top level only: a nested one carries its path
    if unknown:
        field = unknown.group("field")
        return InvalidRequestError(
            f"Unrecognized request argument supplied: '{field[:100]}'.",
            code="unknown_parameter",
            param=field[:256],
        )
    missing = _MISSING.match(message)
    if missing:
        field = missing.group("field")
        param = f"{param}.{field}" if param else field
        return InvalidRequestError(
            f"Missing required parameter: '{param}'.",
            code="missing_required_parameter",
            param=param,
        )
    where = f" at '{param}'" if param else ""
    code = "invalid_type" if _TYPE_ONLY.match(message) else "invalid_value"
    return InvalidRequestError(f"Invalid request{where}: {message}", code=code, param=param)


_MESSAGES_TYPES = (
    (400, "invalid_request_error"),
    (401, "authentication_error"),
    (402, "billing_error"),
    (403, "permission_error"),
    (404, "not_found_error"),
    (408, "timeout_error"),
    (413, "request_too_large"),
    (429, "rate_limit_error"),
    (503, "overloaded_error"),
    (504, "timeout_error"),
    (529, "overloaded_error"),
)


def messages_error_type(status: int) -> str:
    """The Messages error type of an HTTP status: the table above, else ``api_error``
    for a 5xx and ``invalid_request_error`` below."""
    for known, kind in _MESSAGES_TYPES:
        if known == status:
            return kind
    return "api_error" if status >= 500 else "invalid_request_error"


def messages_error_json(err: ApiError) -> bytes:
    return _ENCODER.encode(_messages_error(err))


def messages_error_event(err: ApiError, usage: MessagesUsage | None = None) -> bytes:
    """``event: error`` ending a Messages stream; ``usage``: its Messages usage so far."""
    event = _messages_error(err)
    if usage is not None:
        event.usage = usage
    return b"event: error\ndata: " + _ENCODER.encode(event) + b"\n\n"


def _messages_error(err: ApiError) -> ErrorEvent:
    kind = messages_error_type(err.http_status)
    details = msgspec.UNSET if err.code is None else ErrorDetails(err.code)
    return ErrorEvent(ErrorObject(kind, err.message, err.code, err.param, details))
