"""The rule kinds: regular expressions, keyword lists, PII detectors, JSON schemas."""

from __future__ import annotations

from typing import Any

import msgspec
import pytest

from sluice.config import GuardrailConfig
from sluice.errors import ConfigError
from sluice.guardrails.json_schema import SchemaValidator, schema_rule
from sluice.guardrails.keywords import keywords_rule
from sluice.guardrails.pii import luhn_valid, pii_rules
from sluice.guardrails.regex import regex_rule
from sluice.guardrails.rule import Rule, SpanRule
from sluice.guardrails.window import Channel
from tests.guardrails.senders import NO_WEBHOOKS


def conf(**fields: Any) -> GuardrailConfig:
    base: dict[str, Any] = {"name": "g", "stage": "output", "kind": "regex", "action": "redact"}
    return msgspec.convert({**base, **fields}, GuardrailConfig)


def scan(rules: list[SpanRule], text: str) -> str:
    hits: list[Rule] = []
    return Channel(rules).feed(text, True, hits)


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"pattern": None}, "needs a `pattern`"),
        ({"pattern": "a("}, "invalid pattern"),
        ({"pattern": "a*"}, "can match empty text"),
        ({"kind": "keywords", "words": []}, "needs `words`"),
        ({"kind": "json_schema", "action": "block"}, "needs a `schema`"),
        ({"kind": "json_schema", "schema": {}, "action": "redact"}, "'block' or 'log'"),
        ({"kind": "json_schema", "schema": {}, "stage": "input"}, "checks output"),
        ({"kind": "json_schema", "schema": {"pattern": "("}, "action": "log"}, "schema pattern"),
    ],
    ids=[
        "regex-without-pattern",
        "bad-regex",
        "empty-match",
        "no-words",
        "no-schema",
        "schema-redact",
        "schema-on-input",
        "bad-schema-pattern",
    ],
)
def test_bad_guardrails_fail_at_startup(fields: dict[str, Any], message: str) -> None:
    from sluice.guardrails.selection import Guardrails

    with pytest.raises(ConfigError, match=message):
        Guardrails([conf(**fields)], NO_WEBHOOKS)


def test_regex_case_insensitive_and_replacement() -> None:
    rule = regex_rule(conf(pattern="secret", case_insensitive=True, replacement="***"))
    assert scan([rule], "a SeCrEt here") == "a *** here"


def test_unbounded_regex_matches_are_cut_at_the_window() -> None:
    rule = regex_rule(conf(pattern="sk-[a-z]{3,}", hold_back=9))
    assert rule.hold_back == 9
    assert scan([rule], "sk-abcdefghijkl!") == "[REDACTED]hijkl!"  # 10 characters at most


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("darn it", "[REDACTED] it"),
        ("DARN", "[REDACTED]"),
        ("darnation", "darnation"),
        ("use c++ daily", "use [REDACTED] daily"),
        ("heck-darn", "[REDACTED]-[REDACTED]"),
        ("oh heck yes", "oh [REDACTED]"),
    ],
)
def test_keywords_are_whole_words_longest_first(text: str, expected: str) -> None:
    rule = keywords_rule(
        conf(kind="keywords", words=["darn", "c++", "heck", "heck yes"], case_insensitive=True)
    )
    assert scan([rule], text) == expected


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("key sk-proj-abcdefghijklmnopqrstuvwx end", "key [REDACTED] end"),
        ("AKIAABCDEFGHIJKLMNOP.", "[REDACTED]."),
        ("task-abcdefghijklmnopqrstuvwxyz", "task-abcdefghijklmnopqrstuvwxyz"),
        ("mail jane.doe+x@example.co.uk now", "mail [REDACTED] now"),
        ("card 4111 1111 1111 1111 ok", "card [REDACTED] ok"),
        ("card 4111-1111-1111-1112 ok", "card 4111-1111-1111-1112 ok"),
        ("order 12345678901234567890123", "order 12345678901234567890123"),
    ],
    ids=[
        "openai-key",
        "aws-key",
        "not-a-key",
        "email",
        "card-luhn",
        "card-bad-luhn",
        "long-number",
    ],
)
def test_pii_detectors(text: str, expected: str) -> None:
    assert scan(list(pii_rules(conf(kind="pii"))), text) == expected


def test_pii_entities_can_be_chosen() -> None:
    rules = pii_rules(conf(kind="pii", entities=["email"]))
    assert scan(list(rules), "a@b.io sk-abcdefghijklmnopqrstuvwx") == (
        "[REDACTED] sk-abcdefghijklmnopqrstuvwx"
    )


@pytest.mark.parametrize(
    ("number", "valid"),
    [("4111111111111111", True), ("79927398713", True), ("79927398710", False)],
)
def test_luhn(number: str, valid: bool) -> None:
    assert luhn_valid(number) is valid


SCHEMA: dict[str, Any] = {
    "type": "object",
    "required": ["answer", "tags"],
    "additionalProperties": False,
    "properties": {
        "answer": {"type": "string", "minLength": 1, "pattern": "^[A-Z]"},
        "score": {"type": "number", "minimum": 0, "exclusiveMaximum": 1},
        "tags": {"type": "array", "items": {"$ref": "#/$defs/tag"}, "maxItems": 2},
        "kind": {"enum": ["a", "b"]},
        "n": {"type": "integer"},
        "either": {"oneOf": [{"type": "string"}, {"type": "integer"}]},
    },
    "$defs": {"tag": {"type": "string", "maxLength": 3}},
}


@pytest.mark.parametrize(
    ("value", "valid"),
    [
        ({"answer": "Yes", "tags": []}, True),
        ({"answer": "Yes", "tags": ["abc"], "score": 0.5, "kind": "a", "n": 2}, True),
        ({"answer": "yes", "tags": []}, False),
        ({"answer": "Yes"}, False),
        ({"answer": "Yes", "tags": [], "extra": 1}, False),
        ({"answer": "Yes", "tags": ["abcd"]}, False),
        ({"answer": "Yes", "tags": ["a", "b", "c"]}, False),
        ({"answer": "Yes", "tags": [], "score": 1}, False),
        ({"answer": "Yes", "tags": [], "kind": "c"}, False),
        ({"answer": "Yes", "tags": [], "n": True}, False),
        ({"answer": "Yes", "tags": [], "n": 2.0}, True),
        ({"answer": "Yes", "tags": [], "either": 1.5}, False),
        ([1], False),
    ],
)
def test_schema_validator(value: Any, valid: bool) -> None:
    assert SchemaValidator(SCHEMA).valid(value) is valid


def test_schema_rule_needs_json() -> None:
    rule = schema_rule(conf(kind="json_schema", action="block", schema=SCHEMA))
    assert rule.accepts('{"answer": "Yes", "tags": []}')
    assert not rule.accepts('{"answer": "Yes", "tags": [')
    assert not rule.accepts("Sure! Here is the JSON")
