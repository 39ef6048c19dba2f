"""JSON text as PostgreSQL's ``jsonb`` takes it."""

from __future__ import annotations

import re

import msgspec

_ENCODER = msgspec.json.Encoder()
_NUL_ESCAPE = re.compile(r"(?<!\\)((?:\\\\)*)\\u0000")
"""A NUL character's escape in JSON text (its backslash not itself escaped)."""


def jsonb_text(value: object) -> str:
    """``value`` as JSON PostgreSQL's ``jsonb`` stores: it holds no NUL character, so one
    (in an upstream's error text, say) becomes U+FFFD instead of failing the row."""
    text = _ENCODER.encode(value).decode()
    return _NUL_ESCAPE.sub(r"\1\\ufffd", text) if "\\u0000" in text else text
