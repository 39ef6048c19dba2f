"""Fake upstreams that quote the credential they received into every error field.

An :class:`EchoUpstream` speaks one provider family's wire format (``openai``,
``anthropic``, ``gemini``, ``bedrock``). Each request is answered by the upstream's
current :class:`Scenario`, built from an :class:`Echo` of the request's credential
headers: the whole ``Authorization`` / ``x-api-key`` / ``x-goog-api-key`` value, the key
alone, its URL-encoded form and, for SigV4, the access key id and session token. The
fake knows no canary: it only repeats what the gateway sent it.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import quote

from tests.support import fake_anthropic, fake_bedrock, fake_gemini, fake_openai

Family = str  # "openai" | "anthropic" | "gemini" | "bedrock"
STATUSES = (400, 401, 403, 404, 408, 409, 413, 422, 429, 500, 502, 503, 529)
FORMS = ("echo", "typed", "text")
"""``echo``: every field (type and code too) quotes the credential; ``typed``: the
provider's real type/status names, every other field quotes it; ``text``: a non-JSON
body quoting it."""


@dataclass(frozen=True)
class Echo:
    whole: str
    """The credential header's whole value (``Bearer …``, ``AWS4-HMAC-SHA256 …``)."""
    key: str
    """The key alone (for SigV4: the access key id)."""
    token: str = ""
    """``x-amz-security-token``, if sent."""

    @classmethod
    def of(cls, headers: dict[str, str]) -> Echo:
        whole = (
            headers.get("authorization")
            or headers.get("x-api-key")
            or headers.get("x-goog-api-key")
            or ""
        )
        key = whole
        if whole.lower().startswith("bearer "):
            key = whole[7:]
        elif whole.startswith("AWS4-HMAC-SHA256") and "Credential=" in whole:
            key = whole.split("Credential=", 1)[1].split("/", 1)[0]
        return cls(whole, key, headers.get("x-amz-security-token", ""))

    @property
    def quoted(self) -> str:
        return quote(self.key, safe="")

    @property
    def message(self) -> str:
        text = (
            f"Incorrect API key provided: {self.whole}. You sent the key {self.key} "
            f"(URL-encoded: {self.quoted})."
        )
        if self.token:
            text += f" Session token {self.token} ({quote(self.token, safe='')})."
        return text

    def details(self) -> dict[str, Any]:
        return {
            "authorization": self.whole,
            "api_key": self.key,
            "url_encoded": self.quoted,
            "session_token": self.token,
            "nested": [{"reason": self.message, "metadata": {"key": self.key}}],
        }

    def headers(self) -> dict[str, str]:
        """Response headers quoting it too (an upstream's request id, its auth challenge)."""
        return {
            "x-request-id": self.key,
            "request-id": self.whole,
            "www-authenticate": f'Bearer realm="{self.whole}"',
            "retry-after-ms": self.key,
            "x-echo-token": self.token or self.key,
        }


@dataclass
class Answer:
    status: int
    headers: dict[str, str]
    body: bytes = b""
    chunks: list[bytes] | None = None  # a chunked (streamed) body when set


Scenario = Callable[[Echo, bool], Answer]
"""``(echo, the request asked for a stream) -> the answer``."""


def _json(status: int, doc: Any, headers: dict[str, str]) -> Answer:
    return Answer(status, {"content-type": "application/json", **headers}, json.dumps(doc).encode())


def _text(status: int, echo: Echo) -> Answer:
    body = f"<html><body><h1>{status}</h1><p>{echo.message}</p></body></html>".encode()
    return Answer(status, {"content-type": "text/html", **echo.headers()}, body)


# --- HTTP errors, per family -----------------------------------------------------------

_OPENAI_TYPES = {400: "invalid_request_error", 401: "authentication_error", 429: "rate_limit"}
_ANTHROPIC_TYPES = {
    400: "invalid_request_error",
    401: "authentication_error",
    403: "permission_error",
    404: "not_found_error",
    408: "timeout_error",
    413: "request_too_large",
    422: "billing_error",
    429: "rate_limit_error",
    503: "overloaded_error",
    529: "overloaded_error",
}
_GEMINI_STATUS = {
    400: "INVALID_ARGUMENT",
    401: "UNAUTHENTICATED",
    403: "PERMISSION_DENIED",
    404: "NOT_FOUND",
    408: "DEADLINE_EXCEEDED",
    409: "ABORTED",
    413: "FAILED_PRECONDITION",
    422: "OUT_OF_RANGE",
    429: "RESOURCE_EXHAUSTED",
    503: "UNAVAILABLE",
}
_BEDROCK_TYPES = {
    400: "ValidationException",
    403: "AccessDeniedException",
    404: "ResourceNotFoundException",
    408: "ModelTimeoutException",
    422: "ModelErrorException",
    429: "ThrottlingException",
    500: "InternalServerException",
    502: "ModelStreamErrorException",
    503: "ServiceUnavailableException",
    529: "ModelNotReadyException",
}


def http_error(family: Family, status: int, form: str) -> Scenario:
    """An error answer (whatever the request asked for) in ``family``'s format."""

    def answer(echo: Echo, stream: bool) -> Answer:
        if form == "text":
            return _text(status, echo)
        typed = form == "typed"
        headers = echo.headers()
        msg, key, whole = echo.message, echo.key, echo.whole
        if family == "openai":
            kind = _OPENAI_TYPES.get(status, "server_error") if typed else whole
            code = "invalid_api_key" if typed else key
            err = {"message": msg, "type": kind, "param": echo.quoted, "code": code}
            return _json(status, {"error": {**err, "details": echo.details()}}, headers)
        if family == "anthropic":
            kind = _ANTHROPIC_TYPES.get(status, "api_error") if typed else key
            doc = fake_anthropic.error_body(kind, msg)
            doc["error"]["details"] = echo.details()
            return _json(status, {**doc, "request_id": whole}, headers)
        if family == "gemini":
            grpc = _GEMINI_STATUS.get(status, "INTERNAL") if typed else key
            reason = "API_KEY_INVALID" if typed and status == 400 else whole
            info: dict[str, Any] = {
                "@type": "type.googleapis.com/google.rpc.ErrorInfo",
                "reason": reason,
                "domain": echo.quoted,
                "metadata": {"key": key, "token": echo.token},
            }
            retry = {"@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": key}
            bad: dict[str, Any] = {
                "@type": "type.googleapis.com/google.rpc.BadRequest",
                "fieldViolations": [{"field": echo.quoted, "description": msg}],
            }
            doc = fake_gemini.error(status, msg, grpc, info, retry, bad)
            return _json(status, [doc] if stream else doc, headers)
        kind = _BEDROCK_TYPES.get(status, "InternalServerException") if typed else key
        headers["x-amzn-errortype"] = f"{kind}:http://internal.amazon.com/coral/com.amazon.bedrock/"
        headers["x-amzn-requestid"] = whole
        doc = {"message": msg, "Message": msg, "__type": whole, "details": echo.details()}
        return _json(status, doc, headers)

    return answer


# --- errors inside a 200 stream, per family --------------------------------------------


def _openai_events(echo: Echo) -> dict[str, bytes]:
    err: dict[str, Any] = {"message": echo.message, "type": echo.whole, "code": echo.key}
    err |= {"param": echo.quoted, "details": echo.details()}
    return {
        "error chunk": b"data: " + json.dumps({"error": err}).encode() + b"\n\n",
        "error event": b"event: error\ndata: " + json.dumps({"error": err}).encode() + b"\n\n",
        "error string": b"data: " + json.dumps({"error": echo.message}).encode() + b"\n\n",
    }


def _anthropic_events(echo: Echo) -> dict[str, bytes]:
    unnamed = {"type": "error", "error": {"type": echo.key, "message": echo.message}}
    return {
        "error event": fake_anthropic.error_event(echo.key, echo.message),
        "overloaded event": fake_anthropic.error_event("overloaded_error", echo.message),
        "unnamed error": b"data: " + json.dumps(unnamed).encode() + b"\n\n",
    }


def _gemini_events(echo: Echo) -> dict[str, bytes]:
    detail = {"@type": "type.googleapis.com/google.rpc.ErrorInfo", "reason": echo.whole}
    error = fake_gemini.error(500, echo.message, echo.key, detail)
    blocked = {"promptFeedback": {"blockReason": echo.key}, "responseId": echo.whole}
    return {
        "error object": fake_gemini.event(error),
        "blocked prompt": fake_gemini.event(blocked),
    }


def _bedrock_events(echo: Echo) -> dict[str, bytes]:
    payload = {"message": echo.message, "originalMessage": echo.whole, "key": echo.key}
    error_headers: dict[str, bool | int | bytes | str | fake_bedrock.Typed] = {
        ":message-type": "error",
        ":error-code": echo.key,
        ":error-message": echo.message,
    }
    return {
        "unknown exception": fake_bedrock.frame(
            {
                ":exception-type": echo.key,
                ":content-type": "application/json",
                ":message-type": "exception",
            },
            json.dumps(payload).encode(),
        ),
        "throttling exception": fake_bedrock.exception("throttlingException", echo.message),
        "error frame": fake_bedrock.frame(error_headers, b""),
    }


EVENTS: dict[Family, Callable[[Echo], dict[str, bytes]]] = {
    "openai": _openai_events,
    "anthropic": _anthropic_events,
    "gemini": _gemini_events,
    "bedrock": _bedrock_events,
}


def _prefix(family: Family) -> list[bytes]:
    """Content before a mid-stream error: the answer has begun."""
    if family == "openai":
        return [fake_openai.chunk(role="assistant", content=""), fake_openai.chunk(content="Par")]
    if family == "anthropic":
        start = fake_anthropic.message_start()
        return [start, *fake_anthropic.text_block(0, "Par")[:2]]
    if family == "gemini":
        part = fake_gemini.candidate(fake_gemini.text("Par"))
        return [fake_gemini.event(fake_gemini.response(part))]
    return [fake_bedrock.message_start(), fake_bedrock.text_delta("Par")]


def stream_error(family: Family, variant: str, *, after_content: bool) -> Scenario:
    """A 200 stream that ends in ``variant`` (a key of :data:`EVENTS`), first or after
    some content."""

    def answer(echo: Echo, stream: bool) -> Answer:
        chunks = [*(_prefix(family) if after_content else []), EVENTS[family](echo)[variant]]
        if family == "bedrock":
            return Answer(200, {"content-type": fake_bedrock.EVENTSTREAM}, chunks=chunks)
        return Answer(200, {"content-type": "text/event-stream"}, chunks=chunks)

    return answer


def gemini_whole_error(variant: str) -> Scenario:
    """A whole (non-streamed) 200 Gemini answer that is an error or a blocked prompt."""

    def answer(echo: Echo, stream: bool) -> Answer:
        event = EVENTS["gemini"](echo)[variant]
        body = event.removeprefix(b"data: ").strip()
        return Answer(200, {"content-type": "application/json"}, body)

    return answer


# --- the server ------------------------------------------------------------------------


@dataclass
class EchoUpstream:
    family: Family
    scenario: Scenario = field(default=lambda echo, stream: _text(500, echo))
    requests: int = 0
    credentials: set[str] = field(default_factory=set)
    """Every distinct credential header value received (the row checks the canary was sent)."""
    _server: asyncio.Server | None = None
    port: int = 0

    @property
    def root_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    async def start(self) -> None:
        self._server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        self.port = self._server.sockets[0].getsockname()[1]

    async def close(self) -> None:
        if self._server is not None:
            self._server.close()
            await self._server.wait_closed()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                lines = head.decode("latin-1").split("\r\n")
                _, path, _ = lines[0].split(" ", 2)
                headers: dict[str, str] = {}
                for line in lines[1:]:
                    if line:
                        name, _, value = line.partition(":")
                        headers[name.strip().lower()] = value.strip()
                body = await reader.readexactly(int(headers.get("content-length", "0")))
                self.requests += 1
                echo = Echo.of(headers)
                self.credentials.add(echo.whole)
                stream = b'"stream":true' in body.replace(b" ", b"") or "stream" in path.lower()
                await self._write(writer, self.scenario(echo, stream))
        except (asyncio.IncompleteReadError, ConnectionError, asyncio.LimitOverrunError):
            pass
        finally:
            writer.close()
            with contextlib.suppress(ConnectionError):
                await writer.wait_closed()

    async def _write(self, writer: asyncio.StreamWriter, answer: Answer) -> None:
        head = [f"HTTP/1.1 {answer.status} X", *(f"{k}: {v}" for k, v in answer.headers.items())]
        if answer.chunks is None:
            head.append(f"content-length: {len(answer.body)}")
            writer.write(("\r\n".join(head) + "\r\n\r\n").encode("latin-1") + answer.body)
        else:
            head.append("transfer-encoding: chunked")
            writer.write(("\r\n".join(head) + "\r\n\r\n").encode("latin-1"))
            for chunk in answer.chunks:
                writer.write(b"%x\r\n%s\r\n" % (len(chunk), chunk))
            writer.write(b"0\r\n\r\n")
        await writer.drain()
