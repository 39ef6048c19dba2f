"""Gemini's wire format for the fake upstream: stream events, whole responses, errors.

Events are written the way Google's servers write them: ``data: <json>`` with
``": "`` after keys and CRLF line ends. The official ``google-genai`` SDK reads what
these build (``tests/providers/test_gemini_fidelity.py``).
"""

from __future__ import annotations

import json
from typing import Any

from tests.support.fake_upstream import Step

MODEL = "gemini-test"
RESPONSE_ID = "kQ3XaOfsLZ2bz7IP1-WqsQk"
SIGNATURE = "CiQBcsjafK0kD2Hx7Wm9z3Jq1YyS0c0GQ3rWJq6o9fVqX2m4sT8KZAFyyNp8"


def text(value: str, *, thought: bool = False, signature: str | None = None) -> dict[str, Any]:
    part: dict[str, Any] = {"text": value}
    if thought:
        part["thought"] = True
    if signature is not None:
        part["thoughtSignature"] = signature
    return part


def call(
    name: str, args: dict[str, Any], *, id: str | None = None, signature: str | None = None
) -> dict[str, Any]:
    function: dict[str, Any] = {"name": name, "args": args}
    if id is not None:
        function["id"] = id
    part: dict[str, Any] = {"functionCall": function}
    if signature is not None:
        part["thoughtSignature"] = signature
    return part


def candidate(
    *parts: dict[str, Any], finish: str | None = None, index: int = 0, **extra: Any
) -> dict[str, Any]:
    doc: dict[str, Any] = {}
    if parts:
        doc["content"] = {"parts": list(parts), "role": "model"}
    if finish is not None:
        doc["finishReason"] = finish
    doc["index"] = index
    doc.update(extra)
    return doc


def usage(prompt: int, output: int, *, thoughts: int = 0, cached: int = 0) -> dict[str, Any]:
    doc: dict[str, Any] = {
        "promptTokenCount": prompt,
        "candidatesTokenCount": output,
        "totalTokenCount": prompt + output + thoughts,
        "promptTokensDetails": [{"modality": "TEXT", "tokenCount": prompt}],
    }
    if cached:
        doc["cachedContentTokenCount"] = cached
        doc["cacheTokensDetails"] = [{"modality": "TEXT", "tokenCount": cached}]
    if thoughts:
        doc["thoughtsTokenCount"] = thoughts
    return doc


def response(
    *candidates: dict[str, Any], usage: dict[str, Any] | None = None, **extra: Any
) -> dict[str, Any]:
    """One ``GenerateContentResponse``: a stream event's payload or a whole answer."""
    doc: dict[str, Any] = {}
    if candidates:
        doc["candidates"] = list(candidates)
    doc.update(extra)
    if usage is not None:
        doc["usageMetadata"] = usage
    doc["modelVersion"] = MODEL
    doc["responseId"] = RESPONSE_ID
    return doc


def event(doc: dict[str, Any], *, eol: bytes = b"\r\n") -> bytes:
    return (
        b"data: " + json.dumps(doc, separators=(",", ": "), ensure_ascii=False).encode() + eol + eol
    )


def text_stream(
    *pieces: str, usage: dict[str, Any] | None = None, finish: str = "STOP"
) -> list[Step]:
    """A plain answer: one event per piece, the finish reason on the last one."""
    steps: list[Step] = []
    for n, piece in enumerate(pieces, 1):
        last = n == len(pieces)
        doc = response(candidate(text(piece), finish=finish if last else None), usage=usage)
        steps.append(event(doc))
    return steps


def error(code: int, message: str, status: str, *details: dict[str, Any]) -> dict[str, Any]:
    doc: dict[str, Any] = {"code": code, "message": message, "status": status}
    if details:
        doc["details"] = list(details)
    return {"error": doc}
