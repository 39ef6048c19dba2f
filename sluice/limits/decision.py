"""Which buckets a request touches, and the decision built from their debts (pure).

A request is charged one request and its estimated tokens against the key's and the
account's limits, all or nothing: it is admitted only when every bucket has room, and
a denied request charges nothing. Its end adjusts the token buckets by the difference
between the actual and the estimated tokens; the request itself stays counted, so a
cancelled stream counts as one request.
"""

from __future__ import annotations

from types import MappingProxyType
from typing import Literal

import msgspec

from sluice.config import LimitSpec
from sluice.limits.bucket import Bucket

Dimension = Literal["requests", "tokens"]


class Subject(msgspec.Struct, frozen=True):
    """Who is asking, with the limits that apply to them (``None``: no limit)."""

    key_id: str
    account_id: str
    key: LimitSpec | None = None
    account: LimitSpec | None = None

    def only(self, dimension: Dimension) -> Subject | None:
        """The same caller with only its limits in ``dimension`` (requests are counted
        when a call arrives, tokens once a request is read); None when none apply."""
        key, account = _only(self.key, dimension), _only(self.account, dimension)
        if key is None and account is None:
            return None
        return Subject(self.key_id, self.account_id, key=key, account=account)


def _only(spec: LimitSpec | None, dimension: Dimension) -> LimitSpec | None:
    if spec is None:
        return None
    limit = spec.requests if dimension == "requests" else spec.tokens
    if limit is None:
        return None
    if dimension == "requests":
        return LimitSpec(requests=limit, window=spec.window)
    return LimitSpec(tokens=limit, window=spec.window)


class Ticket(msgspec.Struct, frozen=True):
    """An admitted request, handed back to ``finish`` when it ends."""

    subject: Subject
    estimated_tokens: int


class Line(msgspec.Struct, frozen=True):
    """One bucket a request touches and what it puts there."""

    name: str
    """``"key:requests"``, ``"account:tokens"``, …"""
    ident: str
    """The bucket's storage name. It carries the limit and window, so changing a limit
    starts a fresh bucket; ``{account}`` is a Redis Cluster hash tag (one slot)."""
    bucket: Bucket
    dimension: Dimension
    amount: int


class Quota(msgspec.Struct, frozen=True):
    """One dimension's state for the ``X-RateLimit-*`` headers."""

    limit: int
    remaining: int
    reset_ms: int


class Decision(msgspec.Struct, frozen=True):
    allowed: bool
    retry_after: float = 0.0
    """Seconds until this request would fit (0 when allowed)."""
    requests: Quota | None = None
    """The most constraining request limit (least remaining); ``None``: none applies."""
    tokens: Quota | None = None
    exceeded: tuple[str, ...] = ()
    """Names of the lines that had no room, e.g. ``("account:tokens",)``."""
    limits: tuple[str, ...] = ()
    """Those lines' limits as people read them, e.g. ``"this account's limit of 5,000
    tokens a minute"``."""
    ticket: Ticket | None = None
    """For ``finish``; ``None`` when denied."""


def _lines(subject: Subject, dimension: Dimension, amount: int) -> list[Line]:
    lines = []
    scopes = (
        ("key", subject.key_id, subject.key),
        ("account", subject.account_id, subject.account),
    )
    for scope, owner, spec in scopes:
        if spec is None:
            continue
        limit = spec.requests if dimension == "requests" else spec.tokens
        if limit is None:
            continue
        bucket = Bucket(limit=limit, window_ms=spec.window_ms)
        ident = f"{{{subject.account_id}}}:{scope}:{owner}:{dimension}:{limit}/{bucket.window_ms}"
        lines.append(Line(f"{scope}:{dimension}", ident, bucket, dimension, amount))
    return lines


def admission_lines(subject: Subject, estimated_tokens: int) -> list[Line]:
    if estimated_tokens < 0:
        raise ValueError("estimated_tokens must be >= 0")
    return [*_lines(subject, "requests", 1), *_lines(subject, "tokens", estimated_tokens)]


def settlement_lines(ticket: Ticket, total_tokens: int) -> list[Line]:
    """The token adjustments at the end of a request (none when the estimate was exact)."""
    if total_tokens < 0:
        raise ValueError("total_tokens must be >= 0")
    difference = total_tokens - ticket.estimated_tokens
    return _lines(ticket.subject, "tokens", difference) if difference else []


def fits(lines: list[Line], debts: list[int]) -> bool:
    return all(
        line.bucket.wait_ms(debt, line.amount) == 0 for line, debt in zip(lines, debts, strict=True)
    )


def _quota(lines: list[Line], debts: list[int], dimension: Dimension) -> Quota | None:
    quotas = [
        Quota(line.bucket.limit, line.bucket.remaining(debt), line.bucket.reset_ms(debt))
        for line, debt in zip(lines, debts, strict=True)
        if line.dimension == dimension
    ]
    return min(quotas, key=lambda q: (q.remaining, -q.reset_ms), default=None)


_OWNERS = MappingProxyType({"key": "this API key's", "account": "this account's"})
_WINDOWS = MappingProxyType(
    {1_000: "a second", 60_000: "a minute", 3_600_000: "an hour", 86_400_000: "a day"}
)


def limit_text(line: Line) -> str:
    """``"this API key's limit of 60 requests a minute"``."""
    limit, window_ms = line.bucket.limit, line.bucket.window_ms
    unit = line.dimension if limit != 1 else line.dimension.removesuffix("s")
    per = _WINDOWS.get(window_ms) or f"per {window_ms / 1000:g} s"
    return f"{_OWNERS[line.name.split(':', 1)[0]]} limit of {limit:,} {unit} {per}"


def decide(ticket: Ticket, lines: list[Line], debts: list[int], allowed: bool) -> Decision:
    """The decision from the debts after admission (allowed) or as found (denied)."""
    requests, tokens = _quota(lines, debts, "requests"), _quota(lines, debts, "tokens")
    if allowed:
        return Decision(True, requests=requests, tokens=tokens, ticket=ticket)
    waits = [
        line.bucket.wait_ms(debt, line.amount) for line, debt in zip(lines, debts, strict=True)
    ]
    full = [line for line, wait in zip(lines, waits, strict=True) if wait > 0]
    return Decision(
        False,
        retry_after=max(waits) / 1000,
        requests=requests,
        tokens=tokens,
        exceeded=tuple(line.name for line in full),
        limits=tuple(limit_text(line) for line in full),
    )
