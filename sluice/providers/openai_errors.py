"""An OpenAI-format refusal (an HTTP status of 300 or more) into our error tree.

The body's ``error`` may be an object (``message``, ``code``, ``param``), a string, or
missing with those fields at the top level (servers answer all three ways, some with
``detail`` for ``message``); a body that is not JSON leaves the status to tell.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import msgspec

from sluice.errors import ApiError
from sluice.providers.errors import error_for_status, retry_after_seconds

_ANY = msgspec.json.Decoder()


def parse_openai_error(status: int, headers: Mapping[str, str], body: bytes) -> ApiError:
    message: str | None = None
    code: str | None = None
    param: str | None = None
    try:
        doc: Any = _ANY.decode(body)
    except msgspec.DecodeError:
        doc = None
    if isinstance(doc, dict):
        err = doc.get("error", doc)
        if isinstance(err, str):
            message = err
        elif isinstance(err, dict):
            found = err.get("message") or err.get("detail")
            message = found if isinstance(found, str) else None
            code = str(err["code"]) if err.get("code") is not None else None
            param = err["param"] if isinstance(err.get("param"), str) else None
    return error_for_status(
        status, message, code=code, param=param, retry_after=retry_after_seconds(headers)
    )
