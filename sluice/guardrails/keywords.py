"""Keyword lists: whole words (not inside a longer word), longest first."""

from __future__ import annotations

import re

from sluice.config import GuardrailConfig
from sluice.errors import ConfigError
from sluice.guardrails.regex import PatternRule, configured_rule


def keywords_pattern(words: list[str]) -> str:
    """``(?<!\\w)(?:…)(?!\\w)``: at word edges even when a keyword ends in ``+`` or ``.``."""
    alternatives = "|".join(re.escape(w) for w in sorted(set(words), key=len, reverse=True))
    return rf"(?<!\w)(?:{alternatives})(?!\w)"


def keywords_rule(conf: GuardrailConfig) -> PatternRule:
    words = [w for w in conf.words if w]
    if not words:
        raise ConfigError(f"guardrail {conf.name!r}: kind 'keywords' needs `words`")
    return configured_rule(conf, keywords_pattern(words))
