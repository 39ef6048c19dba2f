"""Sluice API keys: ``sk-sluice-`` + 40 base62 characters (about 238 bits).

Only a SHA-256 digest of a key is stored; keys are random, so a fast digest is the
right tool (there is nothing to brute-force). The readable ``prefix`` (the fixed part
plus 8 characters) names a key in listings and revocation without revealing it.
A string that does not have the exact shape is rejected before any lookup.

What an operator may name keys by (to update, rotate or revoke them) is decided here
once, for the admin API, its schema and the CLI: the start of a readable prefix, and
for revocation also the whole key (matched by its digest) or the key's id.
"""

from __future__ import annotations

import hashlib
import re
from typing import Final

from sluice.ids import base62
from sluice.storage.base import KeySelector

KEY_PREFIX: Final = "sk-sluice-"
KEY_BODY_LENGTH: Final = 40
PREFIX_VISIBLE: Final = 8
SHORTEST_NAMING_PREFIX: Final = len(KEY_PREFIX) + 4
"""A prefix names keys (to update, rotate or revoke them) from this length on."""
READABLE_LENGTH: Final = len(KEY_PREFIX) + PREFIX_VISIBLE
"""How much of a key is stored readable: a longer prefix (not a whole key) names none."""
WHOLE_KEY_PATTERN: Final = rf"^{KEY_PREFIX}[0-9A-Za-z]{{{KEY_BODY_LENGTH}}}$"
NAMING_PREFIX_PATTERN: Final = (
    rf"^{KEY_PREFIX}[0-9A-Za-z]{{{SHORTEST_NAMING_PREFIX - len(KEY_PREFIX)},{KEY_BODY_LENGTH}}}$"
)
"""A prefix that may name keys, up to a whole key (which revocation takes as the key)."""
KEY_ID_PATTERN: Final = r"^key_[0-9A-Za-z]{1,64}$"
_SHAPE: Final = re.compile(WHOLE_KEY_PATTERN)
_NAMING: Final = re.compile(NAMING_PREFIX_PATTERN)
_KEY_ID: Final = re.compile(KEY_ID_PATTERN)
NAMING_HELP: Final = (
    "give a key id (`key_…`), the whole key, or at least `sk-sluice-` and 4 more characters"
)


def new_key(random_bytes: bytes) -> str:
    """A key from 32 bytes of randomness (the caller draws them)."""
    if len(random_bytes) < 30:
        raise ValueError("an API key needs at least 30 random bytes")
    return KEY_PREFIX + base62(random_bytes, KEY_BODY_LENGTH)


def is_key_shaped(candidate: str) -> bool:
    return _SHAPE.fullmatch(candidate) is not None


def keys_named(text: str) -> KeySelector:
    """The keys ``text`` names: the key with that id (``key_…``), the key itself (a
    whole key, by its digest: the secret goes no further), or every key whose readable
    prefix starts so. ValueError (saying what would do) for anything else."""
    if _KEY_ID.fullmatch(text):
        return KeySelector("id", text)
    if is_key_shaped(text):
        return KeySelector("digest", key_digest(text))
    if _NAMING.fullmatch(text):
        return KeySelector("prefix", text)
    raise ValueError(NAMING_HELP)


def none_named(text: str) -> str:
    """Why ``text`` (as :func:`keys_named` reads it) named no live key, for a message:
    never more of a key than its readable prefix."""
    if _KEY_ID.fullmatch(text):
        return f"no live key has the id '{text}'"
    if is_key_shaped(text):
        return (
            f"no live key is '{key_prefix(text)}…' (given whole: once the key is rotated "
            "or revoked, that secret names nothing)"
        )
    if len(text) > READABLE_LENGTH:
        return (
            f"no live key is named by more than `sk-sluice-` and {PREFIX_VISIBLE} characters "
            f"('{key_prefix(text)}…' and more were given): only those are kept readable; "
            "give at most those, or the whole key"
        )
    return f"no live key starts with '{text}'"


def key_digest(key: str) -> str:
    return hashlib.sha256(key.encode("ascii")).hexdigest()


def key_prefix(key: str) -> str:
    return key[:READABLE_LENGTH]
