"""The gateway's log lines: text for people (the default), or ``--log-format json``:
one JSON object per line, and for each request one access line with what an operator
filters on. A line never holds a key (only its readable prefix) or a prompt."""

from __future__ import annotations

import json
import logging
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from sluice.routing.attempts import AttemptRecord
    from sluice.server.call import Call

TEXT_FORMAT = "%(asctime)s %(levelname)s %(name)s %(message)s"


class AccessLine:
    """One request's access-log fields, worked out only when a JSON line is written."""

    __slots__ = ("_call", "_method", "_status")

    def __init__(self, call: Call, method: str, status: int) -> None:
        """``method`` as the client sent it (a HEAD is served as GET)."""
        self._call, self._method, self._status = call, method, status

    def fields(self) -> dict[str, Any]:
        call = self._call
        principal = call.principal
        doc: dict[str, Any] = {
            "request_id": call.request_id,
            "method": self._method,
            "path": call.request.path,
            "status": self._status,
            "key_prefix": None if principal is None else principal.key_prefix,
        }
        exchange = call.exchange
        record = None if exchange is None else exchange.record
        if record is None:
            return doc
        return doc | {
            "account": record.account_id,
            "front_door": record.front_door,
            "model": record.requested_model,
            "served_model": record.served_model,
            "provider": record.provider,
            "connection": record.connection,
            "outcome": record.status,
            "ttft_ms": record.ttft_ms,
            "duration_ms": record.duration_ms,
            "prompt_tokens": record.prompt_tokens,
            "completion_tokens": record.completion_tokens,
            "cost": record.cost,
            "error_code": record.error_code,
            "attempts": [_attempt(a) for a in exchange.attempts] if exchange else [],
        }


def printable(text: str, limit: int = 256) -> str:
    """``text`` as a log line may carry it: control characters escaped, at most
    ``limit`` characters (a refused request's target is whatever the client sent)."""
    if text.isprintable() and len(text) <= limit:
        return text
    shown = "".join(c if c.isprintable() else f"\\x{ord(c):02x}" for c in text[:limit])
    return shown + ("…" if len(text) > limit else "")


class RefusalLine:
    """The access-log fields of a request the HTTP layer refused before any handler
    (malformed, too large, too slow): its method may never have been read."""

    __slots__ = ("_path", "_request_id", "_status")

    def __init__(self, request_id: str, path: str, status: int) -> None:
        self._request_id, self._path, self._status = request_id, path, status

    def fields(self) -> dict[str, Any]:
        return {
            "request_id": self._request_id,
            "method": None,
            "path": self._path,
            "status": self._status,
            "key_prefix": None,
        }


def _attempt(attempt: AttemptRecord) -> dict[str, object]:
    return {"route": attempt.position, "connection": attempt.connection, "outcome": attempt.outcome}


class JsonFormatter(logging.Formatter):
    """``{"ts", "level", "logger", "message", …}``, an access line's fields included."""

    def format(self, record: logging.LogRecord) -> str:
        doc: dict[str, Any] = {
            "ts": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
        }
        access = getattr(record, "access", None)
        if isinstance(access, AccessLine | RefusalLine):
            doc |= access.fields()
        if record.exc_info:
            doc["exception"] = self.formatException(record.exc_info)
        return json.dumps(doc, separators=(",", ":"), default=str)


def log_formatter(kind: str) -> logging.Formatter:
    return JsonFormatter() if kind == "json" else logging.Formatter(TEXT_FORMAT)
