"""The one scrubber for text that came from an upstream and goes on to a client or a log.

An upstream's error can quote what the gateway sent it: the ``Authorization`` header,
an ``x-api-key``, a signed URL. A :class:`Redactor` knows the request's own upstream
credentials exactly (and their URL-encoded form) and replaces them wherever they
appear, in any letter case (a provider may fold an echoed value into an upper- or
lower-case code), then replaces what merely looks like a credential (``sk-…``, ``Bearer …``, an
AWS access key id, a Google API key, a ``key=`` query parameter). It is applied to
every string field of an error (message, code, param) before the error is recorded,
logged or sent.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Final
from urllib.parse import quote

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


class Redactor:
    """Replaces the given secrets, then credential-looking text, with ``[redacted]``."""

    __slots__ = ("_known",)

    def __init__(self, secrets: Iterable[str]) -> None:
        forms = set()
        for secret in secrets:
            if len(secret) >= MIN_SECRET_CHARS:
                forms.add(secret)
                forms.add(quote(secret, safe=""))
        longest_first = sorted(forms, key=len, reverse=True)
        self._known = (
            re.compile("|".join(map(re.escape, longest_first)), re.IGNORECASE)
            if longest_first
            else None
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
