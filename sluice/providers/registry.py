"""Which provider kinds exist, what they need, and their adapters.

This table is the only place that lists provider kinds; everything outside
``providers/`` asks it.
"""

from __future__ import annotations

import importlib
import re
from collections.abc import Callable, Mapping
from typing import Final, cast

import msgspec

from sluice.errors import ConfigError
from sluice.ids import IdFactory
from sluice.providers.base import Adapter, CountsTokens, EmbedsText
from sluice.wire.bounds import DEFAULT_MAX_EVENT_BYTES


class ProviderSpec(msgspec.Struct, frozen=True):
    kind: str
    make: Callable[[str, IdFactory, int], Adapter]
    """``(kind, new_id, max_event_bytes)`` -> the adapter."""
    default_base_url: str | None
    env_key: str | None = None
    """Environment variable whose presence creates a connection (``env_connections``)."""
    needs_key: bool = True
    local: bool = False
    """Served in-process (no network, no credentials)."""
    needs_region: bool = False
    """Signed for a region (AWS): one is required unless the connection has an API key."""
    region_env: tuple[str, ...] = ()
    """Environment variables a region is read from (first set wins) when a connection
    names none."""


def _adapter(module: str, name: str) -> Callable[[str, IdFactory, int], Adapter]:
    """Import an adapter's module on first use: `import sluice` stays light."""

    def make(kind: str, new_id: IdFactory, max_event_bytes: int) -> Adapter:
        cls = getattr(importlib.import_module(f"sluice.providers.{module}"), name)
        return cast(Adapter, cls(kind, new_id, max_event_bytes))

    return make


_OPENAI = _adapter("openai", "OpenAIAdapter")

PROVIDERS: tuple[ProviderSpec, ...] = (
    ProviderSpec("openai", _OPENAI, "https://api.openai.com/v1", "OPENAI_API_KEY"),
    ProviderSpec(
        "anthropic",
        _adapter("anthropic", "AnthropicAdapter"),
        "https://api.anthropic.com",
        "ANTHROPIC_API_KEY",
    ),
    ProviderSpec(
        "gemini",
        _adapter("gemini", "GeminiAdapter"),
        "https://generativelanguage.googleapis.com",
        "GEMINI_API_KEY",
    ),
    ProviderSpec(
        "aws-bedrock",
        _adapter("bedrock", "BedrockAdapter"),
        "https://bedrock-runtime.{region}.amazonaws.com",
        "AWS_BEARER_TOKEN_BEDROCK",
        needs_key=False,
        needs_region=True,
        region_env=("AWS_REGION", "AWS_DEFAULT_REGION"),
    ),
    ProviderSpec("deepseek", _OPENAI, "https://api.deepseek.com", "DEEPSEEK_API_KEY"),
    ProviderSpec("openai-compatible", _OPENAI, None, needs_key=False),
    ProviderSpec(
        "demo", _adapter("demo", "DemoAdapter"), "demo://local", needs_key=False, local=True
    ),
)


def provider_spec(kind: str) -> ProviderSpec:
    for spec in PROVIDERS:
        if spec.kind == kind:
            return spec
    known = ", ".join(s.kind for s in PROVIDERS)
    raise ConfigError(f"unknown provider kind {kind!r} (known: {known})")


class Abilities:
    """An adapter and its optional abilities (the small protocols in
    :mod:`sluice.providers.base`), resolved once when it is built: each is the adapter
    itself where it implements that protocol, None where it does not."""

    __slots__ = ("adapter", "counts_tokens", "embeds_text")

    def __init__(self, adapter: Adapter) -> None:
        self.adapter = adapter
        self.counts_tokens: CountsTokens | None = (
            adapter if isinstance(adapter, CountsTokens) else None
        )
        self.embeds_text: EmbedsText | None = adapter if isinstance(adapter, EmbedsText) else None


class AdapterRegistry:
    """One adapter per kind, built on first use with the gateway's id factory and the
    largest stream event an upstream may send."""

    def __init__(self, new_id: IdFactory, max_event_bytes: int = DEFAULT_MAX_EVENT_BYTES) -> None:
        self._new_id = new_id
        self._max_event_bytes = max_event_bytes
        self._abilities: dict[str, Abilities] = {}

    def abilities(self, kind: str) -> Abilities:
        found = self._abilities.get(kind)
        if found is None:
            make = provider_spec(kind).make
            adapter = make(kind, self._new_id, self._max_event_bytes)
            found = self._abilities[kind] = Abilities(adapter)
        return found

    def adapter(self, kind: str) -> Adapter:
        return self.abilities(kind).adapter


def region_from_env(spec: ProviderSpec, env: Mapping[str, str]) -> str | None:
    """The region in the first of ``spec.region_env`` that is set, if any."""
    return next((env[name] for name in spec.region_env if env.get(name)), None)


_REGION: Final = re.compile(r"[a-z0-9]+(?:-[a-z0-9]+)*")


def upstream_base_url(spec: ProviderSpec, base_url: str | None, region: str | None) -> str:
    """A connection's base URL: its own or the provider's default, ``{region}`` filled
    in. ``ValueError`` says what is missing (settings, the admin API and accounts'
    connections all resolve it here)."""
    url = base_url or spec.default_base_url
    if not url:
        raise ValueError(f"base_url is required for {spec.kind}")
    if "{region}" in url:
        if not region:
            raise ValueError(f"a region is required for {spec.kind}")
        if _REGION.fullmatch(region) is None:
            raise ValueError("region is lower-case letters, digits and hyphens (us-east-1)")
        url = url.format(region=region)
    return url
