"""sluice/providers/registry.py: one adapter per kind, its optional abilities resolved
once when it is built."""

from __future__ import annotations

import pytest

from sluice.providers.registry import PROVIDERS, AdapterRegistry
from tests.support.gateway import counting_ids

COUNTS_TOKENS = {"anthropic"}
"""The kinds whose provider counts a prompt's tokens itself."""


@pytest.mark.parametrize("kind", [s.kind for s in PROVIDERS])
def test_an_adapter_counts_tokens_only_when_it_has_the_ability(kind: str) -> None:
    abilities = AdapterRegistry(counting_ids()).abilities(kind)
    counter: object = abilities.counts_tokens
    assert counter is (abilities.adapter if kind in COUNTS_TOKENS else None)


def test_abilities_are_resolved_once_per_adapter() -> None:
    registry = AdapterRegistry(counting_ids())
    first = registry.abilities("anthropic")
    assert registry.abilities("anthropic") is first
    assert registry.adapter("anthropic") is first.adapter
