"""``GET /v1/requests/live``: server-sent snapshots of the requests in flight, an
account's own with an API key and every account's with the admin key, tokens rising
while a stream runs, the id listed as finished once it ends."""

from __future__ import annotations

import asyncio
import json
import os
import time
from functools import partial
from pathlib import Path
from typing import Any

from sluice.accounts.keys import key_digest, key_prefix, new_key
from sluice.core.principal import KeyPolicy
from sluice.exchange.tasks import Tasks
from sluice.server.live import MAX_ROWS, LiveFeeds
from sluice.storage.base import RequestRecord
from tests.server.test_admin import ADMIN, ENV
from tests.support.accounts import metered_key
from tests.support.fake_openai import chunk
from tests.support.fake_upstream import FakeUpstream, Reply, Step, WaitFor
from tests.support.gateway import openai_connection_toml, running_gateway
from tests.support.raw_http import RawClient, exchange, get, post

BODY = json.dumps(
    {"model": "test/gpt-fake", "stream": True, "messages": [{"role": "user", "content": "hi"}]}
).encode()
SERVER = "[server]\nport = 0\nsse_keepalive_interval = 0\n"


class Feed:
    """A reader of the live feed over one raw connection."""

    def __init__(self, client: RawClient) -> None:
        self.client = client

    @classmethod
    async def open(cls, host: str, port: int, token: str, query: str = "") -> Feed:
        client = await RawClient.connect(host, port)
        await client.send(get(f"/v1/requests/live{query}", token))
        status, headers = await client.read_head()
        assert status == 200
        assert headers["content-type"] == "text/event-stream; charset=utf-8"
        return cls(client)

    async def next(self) -> dict[str, Any]:
        data = await asyncio.wait_for(self.client.read_chunk(), 5)
        assert data is not None
        event, payload = data.decode().rstrip("\n").split("\n")
        assert event == "event: requests"
        parsed: dict[str, Any] = json.loads(payload.removeprefix("data: "))
        return parsed

    async def until(self, wanted: str) -> dict[str, Any]:
        """The first snapshot taken from now on that lists request ``wanted`` in flight
        (those queued before are stale)."""
        now = time.time()
        for _ in range(100):
            snapshot = await self.next()
            listed = any(row["id"] == wanted for row in snapshot["requests"])
            if listed and snapshot["at"] >= now:
                return snapshot
        raise AssertionError(f"{wanted} never appeared")


def gated_stream(gates: list[asyncio.Event]) -> list[Step]:
    steps: list[Step] = [chunk(role="assistant", content="")]
    for gate in gates:
        steps += [chunk(content="word " * 20), WaitFor(gate)]
    steps.append(chunk(finish="stop"))
    return steps


async def test_an_account_watches_its_stream_rise_and_finish(
    tmp_path: Path, fake: FakeUpstream
) -> None:
    gates = [asyncio.Event() for _ in range(3)]
    fake.queue(Reply.stream(*gated_stream(gates)))
    async with running_gateway(tmp_path, SERVER + openai_connection_toml(fake.base_url)) as gw:
        key = await metered_key(gw.gateway.store, "team", 10**9)
        other = await metered_key(gw.gateway.store, "other", 10**9)
        feed = await Feed.open(gw.host, gw.port, key, "?interval_ms=100")
        theirs = await Feed.open(gw.host, gw.port, other, "?interval_ms=100")
        client = await RawClient.connect(gw.host, gw.port)
        await client.send(post("/v1/chat/completions", BODY, key))
        _, headers = await client.read_head()
        request_id = headers["x-request-id"]
        counts = []
        for gate in gates:
            await asyncio.sleep(0.15)  # the chunk before the gate is through
            snapshot = await feed.until(request_id)
            (row,) = snapshot["requests"]
            assert row["status"] == "in_progress" and row["requested_model"] == "test/gpt-fake"
            counts.append((row["completion_tokens"], row["duration_ms"]))
            gate.set()
        while await client.read_chunk() is not None:
            pass
        await client.close()
        for _ in range(20):
            snapshot = await feed.next()
            if request_id in snapshot["finished"]:
                break
        else:
            raise AssertionError("the request never finished")
        assert snapshot["requests"] == []
        other_view = [await theirs.next() for _ in range(3)]
        await feed.client.close()
        await theirs.client.close()
    tokens = [count for count, _ in counts]
    assert 0 < tokens[0] < tokens[1] < tokens[2], tokens
    assert counts[0][1] < counts[2][1]  # elapsed time grows
    assert all(view["requests"] == [] for view in other_view)


async def test_the_admin_key_watches_every_account(tmp_path: Path, fake: FakeUpstream) -> None:
    gates = [asyncio.Event(), asyncio.Event()]
    fake.queue(Reply.stream(*gated_stream(gates[:1])), Reply.stream(*gated_stream(gates[1:])))
    config = SERVER + openai_connection_toml(fake.base_url)
    async with running_gateway(tmp_path, config, env=ENV) as gw:
        keys = [await metered_key(gw.gateway.store, name, 10**9) for name in ("a", "b")]
        feed = await Feed.open(gw.host, gw.port, ADMIN, "?interval_ms=100")
        clients = []
        for key in keys:
            client = await RawClient.connect(gw.host, gw.port)
            await client.send(post("/v1/chat/completions", BODY, key))
            await client.read_head()
            clients.append(client)
        for _ in range(50):
            snapshot = await feed.next()
            if len(snapshot["requests"]) == 2:
                break
        accounts = {row["account_id"] for row in snapshot["requests"]}
        for gate in gates:
            gate.set()
        for client in clients:
            while await client.read_chunk() is not None:
                pass
            await client.close()
        await feed.client.close()
    assert len(accounts) == 2


async def test_the_feed_ends_when_the_gateway_stops(tmp_path: Path) -> None:
    async with running_gateway(tmp_path, SERVER) as gw:
        key = await metered_key(gw.gateway.store, "team", 10**9)
        feed = await Feed.open(gw.host, gw.port, key, "?interval_ms=100")
        assert (await feed.next())["requests"] == []
    ended = False
    for _ in range(100):
        try:
            data = await asyncio.wait_for(feed.client.read_chunk(), 5)
        except ConnectionError:
            ended = True
            break
        if data is None:
            ended = True
            break
    await feed.client.close()
    assert ended


async def test_no_key_a_wrong_key_and_a_bad_interval_are_refused(tmp_path: Path) -> None:
    async with running_gateway(tmp_path, SERVER, env=ENV) as gw:
        key = await metered_key(gw.gateway.store, "team", 10**9)
        keyless = await exchange(gw.host, gw.port, get("/v1/requests/live", None))
        keyless_bad = await exchange(gw.host, gw.port, get("/v1/requests/live?interval_ms=5", None))
        wrong = await exchange(gw.host, gw.port, get("/v1/requests/live", "sk-nope"))
        bad = await exchange(gw.host, gw.port, get("/v1/requests/live?interval_ms=5", key))
        unknown = await exchange(gw.host, gw.port, get("/v1/requests/live?x=1", key))
    assert keyless.status == 401 and wrong.status == 401
    assert keyless_bad.status == 401  # who asks is checked before what they ask
    assert bad.status == 400 and bad.json()["error"]["code"] == "invalid_interval"
    assert unknown.status == 400 and unknown.json()["error"]["param"] == "x"


async def test_a_revoked_keys_feed_ends_at_its_next_event(tmp_path: Path) -> None:
    """Found by an adversarial pass: an open feed went on carrying the account's rows
    after its key was revoked."""
    async with running_gateway(tmp_path, SERVER, env=ENV) as gw:
        key = await metered_key(gw.gateway.store, "team", 10**9)
        feed = await Feed.open(gw.host, gw.port, key, "?interval_ms=100")
        assert (await feed.next())["requests"] == []
        revoke = json.dumps({"prefix": key[:16]}).encode()
        revoked = await exchange(gw.host, gw.port, post("/admin/keys/revoke", revoke, ADMIN))
        assert revoked.status == 200 and revoked.json()["revoked"] == 1
        seen = 0
        while (data := await asyncio.wait_for(feed.client.read_chunk(), 5)) is not None:
            seen += 1
            assert seen < 3, data  # at most the event already on its way
        await feed.client.close()


async def test_head_answers_the_head_and_the_connection_goes_on(tmp_path: Path) -> None:
    """Found by an adversarial pass: HEAD started the endless feed without a body, so
    the keep-alive connection never answered its next request."""
    async with running_gateway(tmp_path, SERVER) as gw:
        key = await metered_key(gw.gateway.store, "team", 10**9)
        client = await RawClient.connect(gw.host, gw.port)
        head = get("/v1/requests/live", key).replace(b"GET ", b"HEAD ", 1)
        await client.send(head + get("/health", None))
        status, headers = await asyncio.wait_for(client.read_head(), 5)
        after = await asyncio.wait_for(client.read_response(), 5)
        await client.close()
    assert status == 200 and headers["content-type"].startswith("text/event-stream")
    assert after.status == 200 and after.json() == {"status": "ok"}


async def test_feeds_per_key_and_per_account_are_capped_and_given_back(tmp_path: Path) -> None:
    """Found by an attacker's pass: a key limited to 1 request a minute opened 300 feeds."""
    config = "[server]\nport = 0\nlive_feeds_per_key = 2\nlive_feeds_per_account = 3\n"
    async with running_gateway(tmp_path, config) as gw:
        store = gw.gateway.store
        key = await metered_key(store, "team", 10**9)
        account = (await store.get_account("team")).id  # type: ignore[union-attr]
        second = new_key(os.urandom(32))
        await store.add_key(
            "key_team2",
            account_id=account,
            key_digest=key_digest(second),
            prefix=key_prefix(second),
            name=None,
            now=1,
        )
        feeds = [await Feed.open(gw.host, gw.port, key) for _ in range(2)]
        over_key = await exchange(gw.host, gw.port, get("/v1/requests/live", key))
        third = await Feed.open(gw.host, gw.port, second)
        over_account = await exchange(gw.host, gw.port, get("/v1/requests/live", second))
        await feeds[0].client.close()
        await asyncio.sleep(0.1)  # the gateway sees the feed go
        again = await Feed.open(gw.host, gw.port, key)
        for feed in (feeds[1], third, again):
            await feed.client.close()
    for refused in (over_key, over_account):
        assert refused.status == 429
        assert refused.json()["error"]["code"] == "too_many_live_feeds"


async def test_opening_a_feed_counts_against_the_keys_request_limit(tmp_path: Path) -> None:
    async with running_gateway(tmp_path, SERVER) as gw:
        key = await metered_key(gw.gateway.store, "team", 10**9, KeyPolicy(rpm=1))
        feed = await Feed.open(gw.host, gw.port, key)
        refused = await exchange(gw.host, gw.port, get("/v1/requests/live", key))
        await feed.client.close()
    assert refused.status == 429 and refused.json()["error"]["code"] == "rate_limit_exceeded"
    assert refused.headers["x-ratelimit-remaining-requests"] == "0"


class CountingTasks(Tasks):
    """Tasks that count the request-log rows built for feeds."""

    def __init__(self) -> None:
        super().__init__(time.monotonic, 60.0)
        self.built = 0

    def add(self, account: str, n: int) -> None:
        for i in range(n):
            request_id = f"req_{account}_{i}"
            self.running(request_id, account, partial(self._row, request_id, account))

    def _row(self, request_id: str, account: str) -> RequestRecord:
        self.built += 1
        return RequestRecord(id=request_id, account_id=account, key_id="k", created_at=1)


def test_a_feed_costs_its_own_accounts_rows_once_per_tick() -> None:
    """Found by an attacker's pass: every event of every feed built the row of every
    request in flight for every account, then kept the caller's."""
    tasks = CountingTasks()
    tasks.add("acct_busy", 300)
    tasks.add("acct_small", 3)
    now = [100.0]
    feeds = LiveFeeds(lambda: now[0], lambda: 1_700_000_000.0)
    with feeds.opened("key_a", "acct_small", (4, 16)), feeds.opened("key_b", "acct_small", (4, 16)):
        shared = [feeds.snapshot(tasks, "acct_small") for _ in range(50)]  # 50 feeds, one tick
        assert tasks.built == 3 and len(shared[0].ids) == 3
        now[0] += 1.0  # the next tick
        feeds.snapshot(tasks, "acct_small")
        assert tasks.built == 6
    with feeds.opened("key_c", None, (4, 16)):  # the admin key: every account's, bounded
        everything = feeds.snapshot(tasks, None)
    assert len(everything.ids) == MAX_ROWS and everything.truncated
