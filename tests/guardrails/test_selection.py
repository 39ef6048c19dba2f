"""Which guardrails apply to a request: by account, key and route."""

from __future__ import annotations

from typing import Any

import msgspec
import pytest

from sluice.config import GuardrailConfig
from sluice.core.principal import Principal
from sluice.errors import ConfigError
from sluice.guardrails.selection import Guardrails
from tests.guardrails.senders import NO_WEBHOOKS

WHO = Principal("acct_1", "team-a", "key_1", "sk-sl-abc", metered=False, is_dev=False)


def rail(
    name: str, stage: str = "output", scope: dict[str, list[str]] | None = None
) -> GuardrailConfig:
    doc: dict[str, Any] = {
        "name": name,
        "stage": stage,
        "kind": "keywords",
        "words": [name],
        "applies_to": scope or {},
    }
    return msgspec.convert(doc, GuardrailConfig)


@pytest.mark.parametrize(
    ("scope", "route", "applies"),
    [
        ({}, None, True),
        ({"accounts": ["team-a"]}, None, True),
        ({"accounts": ["acct_1"]}, None, True),
        ({"accounts": ["team-b"]}, None, False),
        ({"keys": ["sk-sl-abc"]}, None, True),
        ({"keys": ["key_1"]}, None, True),
        ({"keys": ["key_2"]}, None, False),
        ({"routes": ["support-bot"]}, "support-bot", True),
        ({"routes": ["support-bot"]}, "test/model", False),
        ({"accounts": ["team-a"], "routes": ["support-bot"]}, "other", False),
    ],
)
def test_scope(scope: dict[str, list[str]], route: str | None, applies: bool) -> None:
    selected = Guardrails([rail("x", scope=scope)], NO_WEBHOOKS).select(WHO, route)
    assert bool(selected.output) is applies
    assert not selected.input


def test_rules_are_split_by_stage_in_config_order() -> None:
    rails = Guardrails([rail("a", "input"), rail("b"), rail("c", "input")], NO_WEBHOOKS)
    selected = rails.select(WHO, None)
    assert [r.name for r in selected.input.spans] == ["a", "c"]
    assert [r.name for r in selected.output.spans] == ["b"]


def test_no_guardrails_selects_nothing() -> None:
    rails = Guardrails([], NO_WEBHOOKS)
    assert not rails
    assert not rails.select(WHO, None).input and not rails.select(WHO, None).output


def test_names_are_unique() -> None:
    with pytest.raises(ConfigError, match="duplicate guardrail names: a"):
        Guardrails([rail("a"), rail("a", "input")], NO_WEBHOOKS)


def test_the_issue_example_parses() -> None:
    from sluice.config import parse_config

    file = parse_config(
        """
[[guardrails]]
name = "no-secrets"
stage = "output"          # input | output
kind = "regex"            # regex | keywords | pii | json_schema | webhook
pattern = "sk-[A-Za-z0-9]{20,}"
action = "block"          # block | redact | log
applies_to = { routes = ["support-bot"] }   # omitted: every request
"""
    )
    rails = Guardrails(file.guardrails, NO_WEBHOOKS)
    assert [r.name for r in rails.select(WHO, "support-bot").output.spans] == ["no-secrets"]
    assert not rails.select(WHO, None).output
