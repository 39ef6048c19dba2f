"""The ``[[guardrails]]`` tables of the config file (docs/guardrails.md)."""

from __future__ import annotations

from typing import Annotated, Any, Literal

import msgspec

Stage = Literal["input", "output"]
Kind = Literal["regex", "keywords", "pii", "json_schema", "webhook"]
Action = Literal["block", "redact", "log"]
PiiEntity = Literal["api_key", "email", "card"]


class Scope(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """Which requests a guardrail applies to. Each list given must match (an omitted one
    matches everything): accounts by name or id, keys by id or prefix, routes by slug."""

    accounts: list[str] | None = None
    keys: list[str] | None = None
    routes: list[str] | None = None


class GuardrailConfig(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    name: Annotated[str, msgspec.Meta(min_length=1)]
    stage: Stage
    kind: Kind
    action: Action = "block"
    applies_to: Scope = Scope()
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
