"""``GET /v1/requests/live``: the requests in flight, as server-sent events.

Every ``interval_ms`` (default 500) one ``event: requests`` whose data is
:class:`LiveSnapshot`: each request running now as its request-log row so far
(``status: in_progress``, tokens, cost and ``duration_ms`` so far), and the ids that
ended since the previous event, so a page can fetch their final rows. An API key sees
its own account's requests; the admin key sees every account's. The stream lasts until
the client leaves or the gateway stops; the events themselves keep the connection
alive. Snapshots are read from the exchanges' own state: nothing is added to a
stream's path.
"""

from __future__ import annotations

import asyncio
import re
from typing import TYPE_CHECKING

import msgspec

from sluice.errors import AuthenticationError, InvalidRequestError, NotFoundError
from sluice.server.admin import authorize
from sluice.server.auth import credentials
from sluice.server.pages import query_params
from sluice.storage.base import RequestRecord

if TYPE_CHECKING:
    from sluice.server.app import Call, Gateway

LIVE_PATH = "/v1/requests/live"
DEFAULT_INTERVAL_MS = 500
_INTERVAL = re.compile(r"[0-9]{2,5}")
_MIN_MS, _MAX_MS = 100, 10_000
MAX_ROWS = 200
"""At most this many requests per event (the oldest first)."""
_HEADERS = (
    ("content-type", "text/event-stream; charset=utf-8"),
    ("cache-control", "no-store"),
    ("x-accel-buffering", "no"),
)


class LiveSnapshot(msgspec.Struct, kw_only=True):
    """One ``event: requests``."""

    at: float
    """Unix time of the snapshot, seconds."""
    requests: list[RequestRecord]
    """The requests in flight (at most :data:`MAX_ROWS`), oldest first."""
    finished: list[str]
    """Ids that were in flight at the previous event and are not now."""
    truncated: bool = False
    """More requests were in flight than this event lists."""


async def live_requests(gw: Gateway, call: Call) -> None:
    account_id = await _scope(gw, call)
    interval = _interval(query_params(call.request.query, ("interval_ms",)).get("interval_ms"))
    tasks, writer = gw.services.tasks, call.writer
    encoder = msgspec.json.Encoder()
    writer.start(200, [*call.headers, *_HEADERS])
    before: set[str] = set()
    while not tasks.stopping and not writer.head_only:
        if not await _still_allowed(gw, call):  # revoked or expired since: the feed ends
            break
        rows = tasks.in_flight(account_id)
        now = {row.id for row in rows}
        snapshot = LiveSnapshot(
            at=gw.wall_clock(),
            requests=rows[:MAX_ROWS],
            finished=sorted(before - now),
            truncated=len(rows) > MAX_ROWS,
        )
        before = now
        await writer.write(b"event: requests\ndata: %b\n\n" % encoder.encode(snapshot))
        await asyncio.sleep(interval)
    await writer.end()


def _interval(text: str | None) -> float:
    if text is None:
        return DEFAULT_INTERVAL_MS / 1000
    if not _INTERVAL.fullmatch(text) or not _MIN_MS <= int(text) <= _MAX_MS:
        raise InvalidRequestError(
            f"interval_ms must be a whole number from {_MIN_MS} to {_MAX_MS}.",
            code="invalid_interval",
            param="interval_ms",
        )
    return int(text) / 1000


async def _still_allowed(gw: Gateway, call: Call) -> bool:
    """The caller's key is still good (checked before every event, through the auth
    cache a revocation clears at once)."""
    try:
        await _scope(gw, call)
    except AuthenticationError:  # revoked, expired: what authenticating can refuse
        return False
    return True


async def _scope(gw: Gateway, call: Call) -> str | None:
    """The account whose requests the caller may watch; None (every account) for the
    admin key."""
    try:
        authorize(gw, call)
    except (AuthenticationError, NotFoundError):  # not the admin key, or no admin API
        pass
    else:
        return None
    presented = credentials(call.request.headers, None)
    call.principal = await gw.auth.authenticate(presented)
    return call.principal.account_id
