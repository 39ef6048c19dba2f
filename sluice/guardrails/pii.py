"""Common secrets and personal data: API keys, email addresses, card numbers (Luhn).

Every pattern has a finite longest match, so each detector's window is derived
exactly (:mod:`sluice.guardrails.regex`): about 185 characters for API keys, 285 for
email addresses, 40 for card numbers. A longer key or address is not caught whole;
``hold_back`` trades that for less delay.
"""

from __future__ import annotations

import re
from collections.abc import Callable

from sluice.config import GuardrailConfig, PiiEntity
from sluice.guardrails.regex import PatternRule

_KEY_EDGE = r"(?<![A-Za-z0-9_-])"
API_KEY = (
    _KEY_EDGE + r"(?:sk-[A-Za-z0-9_-]{20,180}"  # OpenAI (sk-, sk-proj-), Anthropic (sk-ant-)
    r"|AKIA[0-9A-Z]{16}"  # AWS access key id
    r"|gh[pousr]_[A-Za-z0-9]{36}|github_pat_[A-Za-z0-9_]{82}"  # GitHub
    r"|xox[abposr]-[A-Za-z0-9-]{10,72}"  # Slack
    r"|AIza[0-9A-Za-z_-]{35})"  # Google
)
EMAIL = r"[A-Za-z0-9._%+-]{1,64}@(?:[A-Za-z0-9-]{1,63}\.){1,3}[A-Za-z]{2,24}(?![A-Za-z])"
CARD = r"(?<![0-9])(?:[0-9][ -]?){12,18}[0-9](?![0-9])"


def luhn_valid(candidate: str) -> bool:
    digits = [int(c) for c in candidate if c.isdigit()]
    total = 0
    for i, digit in enumerate(reversed(digits)):
        doubled = digit * 2 if i % 2 else digit
        total += doubled - 9 if doubled > 9 else doubled
    return total % 10 == 0


_DETECTORS: tuple[tuple[PiiEntity, str, Callable[[str], bool] | None], ...] = (
    ("api_key", API_KEY, None),
    ("email", EMAIL, None),
    ("card", CARD, luhn_valid),
)


def pii_rules(conf: GuardrailConfig) -> list[PatternRule]:
    """One rule per detector, all under the guardrail's name, in a fixed order."""
    wanted = set(conf.entities) or {entity for entity, _, _ in _DETECTORS}
    return [
        PatternRule(
            conf.name,
            conf.action,
            re.compile(pattern),
            replacement=conf.replacement,
            hold_back=conf.hold_back,
            accept=accept,
        )
        for entity, pattern, accept in _DETECTORS
        if entity in wanted
    ]
