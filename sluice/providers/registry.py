"""Which provider kinds exist, what they need, and their adapters.

This table is the only place that lists provider kinds; everything outside
``providers/`` asks it.
"""

from __future__ import annotations

from collections.abc import Callable

import msgspec

from sluice.errors import ConfigError
from sluice.ids import IdFactory
from sluice.providers.base import Adapter
from sluice.providers.demo import DemoAdapter
from sluice.providers.openai import OpenAIAdapter


class ProviderSpec(msgspec.Struct, frozen=True):
    kind: str
    make: Callable[[str, IdFactory], Adapter]
    default_base_url: str | None
    env_key: str | None = None
    """Environment variable whose presence creates a connection (``env_connections``)."""
    needs_key: bool = True
    local: bool = False
    """Served in-process (no network, no credentials)."""


def _openai(kind: str, new_id: IdFactory) -> Adapter:
    return OpenAIAdapter(kind, new_id)


def _demo(kind: str, new_id: IdFactory) -> Adapter:
    return DemoAdapter(new_id)


PROVIDERS: tuple[ProviderSpec, ...] = (
    ProviderSpec("openai", _openai, "https://api.openai.com/v1", "OPENAI_API_KEY"),
    ProviderSpec("deepseek", _openai, "https://api.deepseek.com", "DEEPSEEK_API_KEY"),
    ProviderSpec("openai-compatible", _openai, None, needs_key=False),
    ProviderSpec("demo", _demo, "demo://local", needs_key=False, local=True),
)


def provider_spec(kind: str) -> ProviderSpec:
    for spec in PROVIDERS:
        if spec.kind == kind:
            return spec
    known = ", ".join(s.kind for s in PROVIDERS)
    raise ConfigError(f"unknown provider kind {kind!r} (known: {known})")


class AdapterRegistry:
    """One adapter per kind, built on first use with the gateway's id factory."""

    def __init__(self, new_id: IdFactory) -> None:
        self._new_id = new_id
        self._adapters: dict[str, Adapter] = {}

    def adapter(self, kind: str) -> Adapter:
        adapter = self._adapters.get(kind)
        if adapter is None:
            adapter = self._adapters[kind] = provider_spec(kind).make(kind, self._new_id)
        return adapter
