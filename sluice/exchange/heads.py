"""Response headers that do not depend on the wire format."""

from __future__ import annotations

import math
from typing import Final

from sluice.errors import ApiError
from sluice.exchange.ports import Headers

JSON: Final = ("content-type", "application/json")


def error_headers(err: ApiError, base: Headers) -> Headers:
    headers = [*base, JSON]
    if err.retry_after is not None:
        headers.append(("retry-after", str(max(0, math.ceil(err.retry_after)))))
    return headers
