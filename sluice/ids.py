"""Identifiers: ``req_…``, ``call_…``, ``acct_…`` — a prefix and base62 randomness."""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Final

IdFactory = Callable[[str], str]
"""``prefix -> unique id``; injected so pure code stays deterministic under test."""

_ALPHABET: Final = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
ID_DIGITS: Final = 22  # 22 base62 digits hold 128 bits


def base62(data: bytes, length: int) -> str:
    """``length`` base62 digits drawn from ``data`` (big-endian), zero-padded."""
    number = int.from_bytes(data, "big")
    digits = []
    for _ in range(length):
        number, rest = divmod(number, 62)
        digits.append(_ALPHABET[rest])
    return "".join(reversed(digits))


def random_id(prefix: str) -> str:
    """An :data:`IdFactory` backed by the OS's randomness."""
    return f"{prefix}_{base62(os.urandom(16), ID_DIGITS)}"
