"""The request log's listing terms, whatever the backend: which rows a listing keeps,
where a page stopped, and how many rows one listing may read (docs/api.md#the-request-log).
"""

from __future__ import annotations

from typing import Final

import msgspec

REQUEST_STATUSES: Final = (
    "complete",
    "truncated",
    "incomplete",
    "error",
    "blocked",
    "cancelled",
    "shutdown",
)
"""Every status a request-log row can have (``in_progress`` is a live request's only)."""

MAX_EXAMINED: Final = 10_000
"""The most rows one page of a listing reads from an index (a ``model`` filter reads
two, the requested and the served model's): a page whose filters matched fewer rows
than asked for when this many were read comes back short, with a position to resume."""


class RequestFilters(msgspec.Struct, frozen=True, kw_only=True):
    """Which request-log rows a listing keeps; ``None`` keeps any. ``model`` matches the
    requested or the served model; ``since`` is inclusive, ``until`` exclusive (Unix
    seconds of ``created_at``)."""

    account_id: str | None = None
    key_id: str | None = None
    model: str | None = None
    provider: str | None = None
    status: str | None = None
    since: int | None = None
    until: int | None = None


RequestPosition = tuple[int, str]
"""Where a request-log listing stopped: the last row's ``(created_at, id)``."""
