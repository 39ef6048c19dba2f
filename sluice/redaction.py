"""The one scrubber for text that came from an upstream and goes on to a client or a log.

An upstream's error can quote what the gateway sent it: the ``Authorization`` header,
an ``x-api-key``, a signed URL. A :class:`Redactor` knows the request's own upstream
credentials exactly and replaces them wherever they appear, in any letter case (a
provider may fold an echoed value into an upper- or lower-case code) and with any of
their characters percent-encoded, in either case of hex and any number of times over
(``-`` as ``%2D``, ``%2d`` or ``%252D``; a letter as ``%41``): whichever of them an
echo encoded. Then it replaces what merely looks like a credential (``sk-…``,
``Bearer …``, an AWS access key id, a Google API key, a ``key=`` query parameter). It
is applied to every string field of an error (message, code, param) before the error
is recorded, logged or sent.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Final

from sluice.errors import ApiError

REDACTED: Final = "[redacted]"
MIN_SECRET_CHARS: Final = 8
"""Shorter strings are not treated as credentials: replacing them would garble text."""
_CREDENTIAL_LIKE = re.compile(
    r"\b(?:sk|pk|rk)-[A-Za-z0-9_\-]{8,}"
    r"|\bAIza[0-9A-Za-z_\-]{35}\b"
    r"|\b(?:AKIA|ASIA)[0-9A-Z]{16}\b"
    r"|\bBearer\s+\S+"
    r"|(?<=[?&])key=[^&\s\"']+",
    re.IGNORECASE,
)


def _char_forms(char: str) -> str:
    """``char`` as itself or percent-encoded: its UTF-8 bytes, each ``%XX``, the ``%``
    itself encoded again any number of times (``%252D``). Compiled case-insensitive, so
    the hex digits match in either case; fixed alternatives, so matching stays linear."""
    encoded = "".join(f"%(?:25)*{byte:02X}" for byte in char.encode("utf-8"))
    return f"(?:{re.escape(char)}|{encoded})"


_ASCII_FORMS: Final = tuple(_char_forms(chr(code)) for code in range(128))
"""Each ASCII character's pattern, made once: a redactor is built per upstream error."""


def _any_encoding(secret: str) -> str:
    """A pattern for ``secret`` with any of its characters percent-encoded."""
    return "".join(
        _ASCII_FORMS[code] if (code := ord(char)) < 128 else _char_forms(char) for char in secret
    )


class Redactor:
    """Replaces the given secrets, then credential-looking text, with ``[redacted]``."""

    __slots__ = ("_known",)

    def __init__(self, secrets: Iterable[str]) -> None:
        known = sorted({s for s in secrets if len(s) >= MIN_SECRET_CHARS}, key=len, reverse=True)
        self._known = (
            re.compile("|".join(map(_any_encoding, known)), re.IGNORECASE) if known else None
        )

    def text(self, value: str) -> str:
        if self._known is not None:
            value = self._known.sub(REDACTED, value)
        return _CREDENTIAL_LIKE.sub(REDACTED, value)

    def error(self, err: ApiError) -> ApiError:
        """The same error, every string field scrubbed (in place: it keeps its class)."""
        message = self.text(err.message)
        if message != err.message:
            err.message = message
            err.args = (message,)
        if err.code is not None:
            err.code = self.text(err.code)
        if err.param is not None:
            err.param = self.text(err.param)
        if err.upstream_code is not None:
            err.upstream_code = self.text(err.upstream_code)
        return err
