"""Small HTTP helpers shared by the secrets rows: admin calls, chat calls, counting."""

from __future__ import annotations

import asyncio
import json
import re
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import quote, quote_plus

from bench.resilience.harness import Gateway
from tests.support.raw_http import RawResponse, exchange

TIMEOUT = 30.0


def http(method: str, path: str, key: str | None, doc: Any = None) -> bytes:
    body = b"" if doc is None else json.dumps(doc).encode()
    auth = f"Authorization: Bearer {key}\r\n" if key else ""
    kind = "Content-Type: application/json\r\n" if doc is not None else ""
    return (
        f"{method} {path} HTTP/1.1\r\nHost: gateway.test\r\n{auth}{kind}"
        f"Content-Length: {len(body)}\r\n\r\n"
    ).encode() + body


async def call(
    gw: Gateway, method: str, path: str, key: str | None, doc: Any = None
) -> RawResponse:
    return await asyncio.wait_for(exchange(gw.host, gw.port, http(method, path, key, doc)), TIMEOUT)


def chat_body(model: str, stream: bool) -> dict[str, Any]:
    doc: dict[str, Any] = {
        "model": model,
        "max_tokens": 16,
        "messages": [{"role": "user", "content": "Say hello"}],
    }
    if stream:
        doc["stream"] = True
    return doc


async def account_key(gw: Gateway, admin: str, name: str) -> tuple[str, list[RawResponse]]:
    """A new unmetered account and one key for it, through the admin API."""
    made = await call(gw, "POST", "/admin/accounts", admin, {"name": name, "metered": False})
    keyed = await call(gw, "POST", f"/admin/accounts/{name}/keys", admin, {})
    if made.status != 201 or keyed.status != 201:
        raise RuntimeError(f"admin API: {made.status} {made.body!r} / {keyed.status}")
    return str(keyed.json()["key"]), [made, keyed]


def text_of(resp: RawResponse) -> str:
    """A response as text: status, every header, the body."""
    head = "".join(f"{k}: {v}\n" for k, v in resp.headers.items())
    return f"{resp.status}\n{head}\n" + resp.body.decode("utf-8", errors="replace")


@dataclass
class Needle:
    """One secret and the forms of it that must not appear: itself, URL-encoded, and
    the halves of each (a partial echo), matched case-insensitively."""

    label: str
    secret: str
    _full: re.Pattern[str] = field(init=False, repr=False)
    _any: re.Pattern[str] = field(init=False, repr=False)

    def __post_init__(self) -> None:
        forms = {self.secret, quote(self.secret, safe=""), quote_plus(self.secret)}
        forms |= {json.dumps(self.secret)[1:-1]}  # as a JSON string would escape it
        parts = set(forms)
        for form in forms:
            half = len(form) // 2
            parts |= {p for p in (form[:half], form[half:]) if len(p) > 8}
        self._full = _alternation(forms)
        self._any = _alternation(parts)

    def count(self, text: str) -> tuple[int, int]:
        """(whole occurrences, partial ones) in ``text``."""
        hits = self._any.findall(text)
        whole = sum(1 for h in hits if self._full.fullmatch(h))
        return whole, len(hits) - whole

    def first(self, text: str, context: int = 60) -> str | None:
        match = self._any.search(text)
        if match is None:
            return None
        return text[max(0, match.start() - context) : match.end() + context]


def _alternation(forms: set[str]) -> re.Pattern[str]:
    ordered = sorted(forms, key=len, reverse=True)  # a longer form wins at a position
    return re.compile("|".join(re.escape(f) for f in ordered), re.IGNORECASE)
