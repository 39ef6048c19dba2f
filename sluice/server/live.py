"""``GET /v1/requests/live``: the requests in flight, as server-sent events.

Every ``interval_ms`` (default 500) one ``event: requests`` whose data is
:class:`LiveSnapshot`: each request running now as its request-log row so far
(``status: in_progress``, tokens, cost and ``duration_ms`` so far), and the ids that
ended since the previous event, so a page can fetch their final rows. An API key sees
its own account's requests; the admin key sees every account's. The stream lasts until
the client leaves or the gateway stops; the events themselves keep the connection
alive. Snapshots are read from the exchanges' own state: nothing is added to a
stream's path.

What a feed costs is its own account's: the requests running are indexed by account,
and the feeds of one account (ticking on the same beat, aligned on the clock) share one
snapshot per tick. Opening a feed counts as a call against the key's request limit,
and a key, an account (and the admin key) hold at most ``[server] live_feeds_per_key``
and ``live_feeds_per_account`` feeds at once (429 ``too_many_live_feeds`` past that).
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Callable
from contextlib import contextmanager
from typing import TYPE_CHECKING, Final

import msgspec

from sluice.errors import AuthenticationError, InvalidRequestError, NotFoundError, RateLimitError
from sluice.exchange.admission import count_call
from sluice.exchange.tasks import Tasks
from sluice.server.admin import authorize
from sluice.server.auth import credentials
from sluice.server.pages import query_params
from sluice.storage.base import RequestRecord

if TYPE_CHECKING:
    from collections.abc import Iterator

    from sluice.server.call import Call
    from sluice.server.context import GatewayContext

LIVE_PATH = "/v1/requests/live"
DEFAULT_INTERVAL_MS = 500
_INTERVAL = re.compile(r"[0-9]{2,5}")
_MIN_MS, _MAX_MS = 100, 10_000
MAX_ROWS = 200
"""At most this many requests per event (the oldest first)."""
SHARED_FOR: Final = 0.05
"""Seconds one account's snapshot is shared by the feeds ticking within them."""
ADMIN: Final = "admin"
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


class _LiveEvent(msgspec.Struct, kw_only=True):
    """:class:`LiveSnapshot` as written, its rows encoded once for every feed."""

    at: float
    requests: msgspec.Raw
    finished: list[str]
    truncated: bool


class _Shared(msgspec.Struct):
    made: float
    at: float
    rows: msgspec.Raw
    ids: frozenset[str]
    truncated: bool


class LiveFeeds:
    """The feeds open (by key and by account) and the snapshots they share; owned by the
    gateway, shared by every configuration a reload swaps in."""

    def __init__(self, clock: Callable[[], float], wall_clock: Callable[[], float]) -> None:
        self._clock = clock
        self._wall_clock = wall_clock
        self._by_key: dict[str, int] = {}
        self._by_account: dict[str, int] = {}
        self._shared: dict[str | None, _Shared] = {}
        self._encoder = msgspec.json.Encoder()

    @contextmanager
    def opened(self, key_id: str, account_id: str | None, caps: tuple[int, int]) -> Iterator[None]:
        """One more feed of ``key_id`` (of ``account_id``; None: the admin key's) while
        the block runs; 429 when the key or the account holds its most already."""
        per_key, per_account = caps
        holder = ADMIN if account_id is None else account_id
        if self._by_key.get(key_id, 0) >= per_key or (
            account_id is not None and self._by_account.get(holder, 0) >= per_account
        ):
            raise RateLimitError(
                f"Too many live feeds open (at most {per_key} per key and {per_account} per "
                "account); close one first.",
                code="too_many_live_feeds",
                retry_after=1.0,
            )
        self._by_key[key_id] = self._by_key.get(key_id, 0) + 1
        self._by_account[holder] = self._by_account.get(holder, 0) + 1
        try:
            yield
        finally:
            _drop(self._by_key, key_id)
            if _drop(self._by_account, holder):
                self._shared.pop(account_id, None)

    def snapshot(self, tasks: Tasks, account_id: str | None) -> _Shared:
        """The requests running now of ``account_id`` (None: every account), built once
        per :data:`SHARED_FOR` for all its feeds."""
        now = self._clock()
        shared = self._shared.get(account_id)
        if shared is not None and now - shared.made < SHARED_FOR:
            return shared
        rows = tasks.in_flight(account_id, MAX_ROWS)
        shared = _Shared(
            now,
            self._wall_clock(),
            msgspec.Raw(self._encoder.encode(rows)),
            frozenset(row.id for row in rows),
            tasks.running_count(account_id) > MAX_ROWS,
        )
        self._shared[account_id] = shared
        return shared

    def event(self, shared: _Shared, finished: list[str]) -> bytes:
        event = _LiveEvent(
            at=shared.at, requests=shared.rows, finished=finished, truncated=shared.truncated
        )
        return b"event: requests\ndata: %b\n\n" % self._encoder.encode(event)


def _drop(counts: dict[str, int], name: str) -> bool:
    """One fewer for ``name``; True when that was its last."""
    left = counts.get(name, 0) - 1
    if left > 0:
        counts[name] = left
        return False
    counts.pop(name, None)
    return True


async def live_requests(feeds: LiveFeeds, gw: GatewayContext, call: Call) -> None:
    account_id = await _scope(gw, call)
    interval = _interval(query_params(call.request.query, ("interval_ms",)).get("interval_ms"))
    principal = call.principal
    if principal is not None:
        await count_call(gw.services, principal, call.headers)
    server = gw.settings.server
    caps = (server.live_feeds_per_key, server.live_feeds_per_account)
    key_id = ADMIN if principal is None else principal.key_id
    with feeds.opened(key_id, account_id, caps):
        await _feed(gw, call, feeds, account_id, interval)


async def _feed(
    gw: GatewayContext, call: Call, feeds: LiveFeeds, account_id: str | None, interval: float
) -> None:
    tasks, writer = gw.services.tasks, call.writer
    writer.start(200, [*call.headers, *_HEADERS])
    before: frozenset[str] = frozenset()
    while not tasks.stopping and not writer.head_only:
        if not await _still_allowed(gw, call):  # revoked or expired since: the feed ends
            break
        shared = feeds.snapshot(tasks, account_id)
        await writer.write(feeds.event(shared, sorted(before - shared.ids)))
        before = shared.ids
        await asyncio.sleep(interval - gw.clock() % interval)  # on the beat its peers keep
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


async def _still_allowed(gw: GatewayContext, call: Call) -> bool:
    """The caller's key is still good (checked before every event, through the auth
    cache a revocation clears at once)."""
    try:
        await _scope(gw, call)
    except AuthenticationError:  # revoked, expired: what authenticating can refuse
        return False
    return True


async def _scope(gw: GatewayContext, call: Call) -> str | None:
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
