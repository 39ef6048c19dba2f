"""The common rule interface and the notes a request log keeps about guardrails.

Two kinds of rules run inside the gateway: a :class:`SpanRule` finds matches in text
(regular expressions, keyword lists, PII detectors) and can block, redact or log each
one; a :class:`WholeRule` judges a whole text at once (a JSON schema). Webhooks are
the third kind (:mod:`sluice.guardrails.webhook`), asked over HTTP.
"""

from __future__ import annotations

from typing import Protocol

import msgspec

from sluice.config import Action, Stage
from sluice.errors import GuardrailBlockedError


class Note(msgspec.Struct, frozen=True):
    """One line of a request's ``guardrails`` log: never the matched text.

    ``outcome``: ``blocked``, ``redacted``, ``matched`` (action ``log``),
    ``unavailable`` (a checker failed, the request failed closed) or ``failed_open``.
    """

    name: str
    stage: Stage
    action: Action
    outcome: str


def add_note(notes: list[Note], note: Note) -> None:
    """Keep one note per guardrail, stage and outcome."""
    if note not in notes:
        notes.append(note)


class Rule(Protocol):
    @property
    def name(self) -> str: ...

    @property
    def action(self) -> Action: ...


class SpanRule(Rule, Protocol):
    @property
    def replacement(self) -> str: ...

    @property
    def hold_back(self) -> int:
        """Characters after a match start this rule may need before it can decide."""
        ...

    @property
    def context(self) -> int:
        """Characters before a match start this rule looks at (lookbehind, ``\\b``)."""
        ...

    def find(self, text: str, pos: int, end: int) -> tuple[int, int] | None:
        """The first match starting at or after ``pos`` in ``text[:end]``: (start, stop).

        The answer for a start ``q`` depends only on ``text[q - context : q + hold_back
        + 1]``, which is what lets the stream decide with a bounded window.
        """
        ...


class WholeRule(Rule, Protocol):
    def accepts(self, text: str) -> bool:
        """Whether the complete text passes."""
        ...


def outcome_of(action: Action) -> str:
    """The note outcome of a rule that matched."""
    if action == "block":
        return "blocked"
    return "redacted" if action == "redact" else "matched"


def note_match(notes: list[Note], rule: Rule, stage: Stage) -> GuardrailBlockedError | None:
    """Note a rule that matched; for a ``block``, the error naming it (never the text)."""
    add_note(notes, Note(rule.name, stage, rule.action, outcome_of(rule.action)))
    if rule.action != "block":
        return None
    where = "request" if stage == "input" else "response"
    return GuardrailBlockedError(f"The {where} was blocked by guardrail '{rule.name}'.")
