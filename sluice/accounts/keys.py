"""Sluice API keys: ``sk-sluice-`` + 40 base62 characters (about 238 bits).

Only a SHA-256 digest of a key is stored; keys are random, so a fast digest is the
right tool (there is nothing to brute-force). The readable ``prefix`` (the fixed part
plus 8 characters) names a key in listings and revocation without revealing it.
A string that does not have the exact shape is rejected before any lookup.
"""

from __future__ import annotations

import hashlib
import re
from typing import Final

from sluice.ids import base62

KEY_PREFIX: Final = "sk-sluice-"
KEY_BODY_LENGTH: Final = 40
PREFIX_VISIBLE: Final = 8
SHORTEST_NAMING_PREFIX: Final = len(KEY_PREFIX) + 4
"""A prefix names keys (to update, rotate or revoke them) from this length on."""
_SHAPE: Final = re.compile(rf"{KEY_PREFIX}[0-9A-Za-z]{{{KEY_BODY_LENGTH}}}")


def new_key(random_bytes: bytes) -> str:
    """A key from 32 bytes of randomness (the caller draws them)."""
    if len(random_bytes) < 30:
        raise ValueError("an API key needs at least 30 random bytes")
    return KEY_PREFIX + base62(random_bytes, KEY_BODY_LENGTH)


def is_key_shaped(candidate: str) -> bool:
    return _SHAPE.fullmatch(candidate) is not None


def key_digest(key: str) -> str:
    return hashlib.sha256(key.encode("ascii")).hexdigest()


def key_prefix(key: str) -> str:
    return key[: len(KEY_PREFIX) + PREFIX_VISIBLE]
