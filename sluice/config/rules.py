"""The config file's rules on requests: rate limits (``[limits]`` tables and a key's or
an account's own) and guardrails (``[[guardrails]]``)."""

from __future__ import annotations

from typing import Annotated, Any, Final, Literal

import msgspec

# Limits of a key or an account (the arithmetic is limits/bucket.py)
MAX_CAPACITY = 2**50
"""Largest ``limit * window_ms``: leaves room below 2**53 for debts past capacity."""


MAX_WINDOW: Final = 366 * 86_400.0


class LimitSpec(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """Limits of one key or one account; ``None`` means unlimited in that dimension."""

    requests: Annotated[int, msgspec.Meta(ge=1)] | None = None
    """Requests per ``window``, counted when a call arrives; None: no request limit."""
    tokens: Annotated[int, msgspec.Meta(ge=1)] | None = None
    """Tokens per ``window``: a request's estimate when admitted, corrected to its
    usage when it ends; None: no token limit."""
    window: Annotated[float, msgspec.Meta(ge=0.001, le=MAX_WINDOW)] = 60.0
    """Seconds (millisecond precision), at most a leap year."""

    def __post_init__(self) -> None:
        if not 0.001 <= self.window <= MAX_WINDOW:  # inf, nan: nothing to round
            raise ValueError(f"window must be 0.001 to {MAX_WINDOW:g} s")
        for limit in (self.requests, self.tokens):
            if limit is not None and (limit < 1 or limit * self.window_ms > MAX_CAPACITY):
                raise ValueError(f"limit {limit} per {self.window} s is out of range")

    @property
    def window_ms(self) -> int:
        return round(self.window * 1000)


# The ``[[guardrails]]`` tables (docs/guardrails.md)
Stage = Literal["input", "output"]
Kind = Literal["regex", "keywords", "pii", "json_schema", "webhook"]
Action = Literal["block", "redact", "log"]
PiiEntity = Literal["api_key", "email", "card"]


class Scope(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """Which requests a guardrail applies to. Each list given must match (an omitted one
    matches everything): accounts by name or id, keys by id or prefix, routes by slug."""

    accounts: list[str] | None = None
    """Accounts by name or id; None: every account."""
    keys: list[str] | None = None
    """API keys by id or prefix; None: every key."""
    routes: list[str] | None = None
    """Routes by name; None: every request, routed or not."""


class GuardrailConfig(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    name: Annotated[str, msgspec.Meta(min_length=1)]
    """The rule's name, as a blocked request's error and the request log give it."""
    stage: Stage
    """``input``: the request's messages, before any upstream call; ``output``: the
    answer, on the live stream (held back while a match could still be forming)."""
    kind: Kind
    """``regex``, ``keywords``, ``pii``, ``json_schema`` or ``webhook`` (the options
    below say which kind reads them)."""
    action: Action = "block"
    """``block`` (the request or stream ends with ``guardrail_blocked``), ``redact``
    (the match is replaced) or ``log`` (only logged)."""
    applies_to: Scope = Scope()
    """Which requests the rule sees (``[guardrails.applies_to]``); omitted: all."""
    pattern: str | None = None
    """``regex``: a Python regular expression."""
    words: list[str] = []
    """``keywords``: matched as whole words."""
    case_insensitive: bool = False
    """``regex`` and ``keywords``."""
    entities: list[PiiEntity] = []
    """``pii``: which detectors; empty means all of them."""
    replacement: str = "[REDACTED]"
    """What ``redact`` puts in place of a match."""
    schema: dict[str, Any] | None = None
    """``json_schema``: the schema the whole content of each choice must satisfy."""
    url: str | None = None
    """``webhook``: where the checker listens (POST, JSON)."""
    timeout: Annotated[float, msgspec.Meta(gt=0)] = 5.0
    """``webhook``: seconds per call."""
    fail_open: bool = False
    """``webhook``: let the text through (and log it) when the checker fails."""
    batch_chars: Annotated[int, msgspec.Meta(ge=1)] = 512
    """``webhook`` on output: characters of output sent per call."""
    hold_back: Annotated[int, msgspec.Meta(ge=0)] | None = None
    """Characters of output held back for this rule; derived from the pattern if omitted."""
