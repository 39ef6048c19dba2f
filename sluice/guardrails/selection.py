"""The configured guardrails, built at startup and on each reload, and the rules for
one request."""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

from sluice.config import GuardrailConfig, Scope
from sluice.core.principal import Principal
from sluice.errors import ConfigError
from sluice.guardrails.json_schema import schema_rule
from sluice.guardrails.keywords import keywords_rule
from sluice.guardrails.pii import pii_rules
from sluice.guardrails.regex import regex_rule
from sluice.guardrails.rule import SpanRule, WholeRule
from sluice.guardrails.webhook import Sender, WebhookClient, WebhookRule


class RuleSet(NamedTuple):
    spans: tuple[SpanRule, ...] = ()
    wholes: tuple[WholeRule, ...] = ()
    webhooks: tuple[WebhookRule, ...] = ()

    def __bool__(self) -> bool:
        return bool(self.spans or self.wholes or self.webhooks)


def _merged(sets: list[RuleSet]) -> RuleSet:
    return RuleSet(
        tuple(r for s in sets for r in s.spans),
        tuple(r for s in sets for r in s.wholes),
        tuple(r for s in sets for r in s.webhooks),
    )


class Selected(NamedTuple):
    input: RuleSet
    output: RuleSet


NONE = Selected(RuleSet(), RuleSet())


class _Entry(NamedTuple):
    stage: str
    rules: RuleSet
    accounts: frozenset[str] | None
    keys: frozenset[str] | None
    routes: frozenset[str] | None

    def applies(self, who: Principal, route: str | None) -> bool:
        account, key = (who.account_name, who.account_id), (who.key_id, who.key_prefix)
        return (
            (self.accounts is None or not self.accounts.isdisjoint(account))
            and (self.keys is None or not self.keys.isdisjoint(key))
            and (self.routes is None or route in self.routes)
        )


def _rules(conf: GuardrailConfig, client: WebhookClient) -> RuleSet:
    if conf.kind == "regex":
        return RuleSet(spans=(regex_rule(conf),))
    if conf.kind == "keywords":
        return RuleSet(spans=(keywords_rule(conf),))
    if conf.kind == "pii":
        return RuleSet(spans=tuple(pii_rules(conf)))
    if conf.kind == "json_schema":
        return RuleSet(wholes=(schema_rule(conf),))
    return RuleSet(webhooks=(WebhookRule(conf, client),))


def _names(values: list[str] | None) -> frozenset[str] | None:
    return None if values is None else frozenset(values)


def _entry(conf: GuardrailConfig, client: WebhookClient) -> _Entry:
    scope: Scope = conf.applies_to
    return _Entry(
        conf.stage,
        _rules(conf, client),
        _names(scope.accounts),
        _names(scope.keys),
        _names(scope.routes),
    )


class Guardrails:
    """Every ``[[guardrails]]`` table, compiled; bad ones fail at startup (or the reload)."""

    __slots__ = ("_entries",)

    def __init__(self, configs: Sequence[GuardrailConfig], sender: Sender) -> None:
        """``sender``: the gateway's HTTP client, which webhook guardrails call through."""
        names = [c.name for c in configs]
        duplicates = sorted({n for n in names if names.count(n) > 1})
        if duplicates:
            raise ConfigError(f"duplicate guardrail names: {', '.join(duplicates)}")
        client = WebhookClient(sender)
        self._entries = tuple(_entry(c, client) for c in configs)

    def __bool__(self) -> bool:
        return bool(self._entries)

    def select(self, who: Principal, route: str | None) -> Selected:
        """The rules that apply to this caller and route, in config order."""
        if not self._entries:
            return NONE
        chosen = [e for e in self._entries if e.applies(who, route)]
        return Selected(
            _merged([e.rules for e in chosen if e.stage == "input"]),
            _merged([e.rules for e in chosen if e.stage == "output"]),
        )
