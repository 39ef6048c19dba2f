"""SIGKILL under steady load: which charges a client was told about can a crash lose?

Settlements are written behind the stream, in batches (docs/metering.md#what-a-crash-can-lose):
a charge told in a stream's final chunk (``credits_used``) reaches the ledger within
one write interval (50 ms) plus the batch being written. A SIGKILL loses the ones not
yet written: their holds (or their reservation) are reclaimed and they are free. This
row measures that window: clients stream metered requests back to back, the gateway is
killed mid-load, and each told charge is looked up in the ledger after a restart.
"""

from __future__ import annotations

import asyncio
import json
import signal

from bench.resilience.harness import Context, Row, gateway, row
from bench.resilience.lifecycle_support import (
    ENV,
    hold_for,
    ledger_charges,
    reconcile_cli,
    sqlite_store,
    sse_data,
    storage_toml,
    stream_body,
)
from bench.resilience.load import tier_seconds
from tests.support.accounts import metered_key
from tests.support.fake_openai import text_stream
from tests.support.fake_upstream import FakeUpstream, Reply
from tests.support.gateway import openai_connection_toml
from tests.support.raw_http import RawClient, post

HOLD_TTL = 2.0
BOUND = 0.25
"""A charge told this long before the kill must be in the ledger: the write-behind's
interval (0.05 s) and the batches in flight, with room for a loaded machine."""


def _config(home_toml: str, base_url: str, reclaim_interval: float) -> str:
    return (
        home_toml
        + "[server]\nsse_keepalive_interval = 0\n"
        + f"[metering]\nhold_ttl = {HOLD_TTL}\nreclaim_interval = {reclaim_interval}\n"
        + openai_connection_toml(base_url)
    )


def _told(body: bytes) -> int | None:
    """The charge a finished stream told its client, in nano-dollars."""
    for data in reversed(sse_data(body)):
        if data.startswith(b"{") and b"credits_used" in data:
            return round(float(json.loads(data)["credits_used"]) * 1e9)
    return None


async def _client(host: str, port: int, request: bytes, told: list[tuple[str, int, float]]) -> None:
    """Streams back to back until the gateway dies; each told charge with its moment."""
    loop = asyncio.get_running_loop()
    while True:
        try:
            client = await RawClient.connect(host, port)
        except OSError:
            return
        try:
            while True:
                await client.send(request)
                status, headers = await client.read_head()
                body = b""
                while (piece := await client.read_chunk()) is not None:
                    body += piece
                charge = _told(body)
                if status == 200 and charge is not None:
                    told.append((headers.get("x-request-id", ""), charge, loop.time()))
        except (OSError, asyncio.IncompleteReadError, ValueError):
            return
        finally:
            await client.close()


@row("SIGKILL under load: told charges")
async def sigkill_under_load(ctx: Context) -> list[Row]:
    clients, seconds = ctx.n(8, 16), tier_seconds(ctx, 1.5, 5.0)
    body = stream_body(usage=True)
    credits = 10**6 * hold_for(body)
    fake = FakeUpstream()
    await fake.start()
    fake.default = Reply.stream(
        *text_stream("a", " short", " answer", usage={"prompt_tokens": 9, "completion_tokens": 3})
    )
    home = ctx.home("told")
    store = await sqlite_store(home)
    loop = asyncio.get_running_loop()
    told: list[tuple[str, int, float]] = []
    try:
        async with gateway(
            ctx, _config(storage_toml(home), fake.base_url, 3600), env=ENV, home=home
        ) as gw:
            key = await metered_key(store, "told", credits)
            request = post("/v1/chat/completions", body, key)
            load = [
                asyncio.ensure_future(_client(gw.host, gw.port, request, told))
                for _ in range(clients)
            ]
            await asyncio.sleep(seconds)
            gw.kill(signal.SIGKILL)
            killed_at = loop.time()
            await asyncio.wait_for(asyncio.gather(*load), 10)
        (home / "gateway.log").rename(home / "gateway-killed.log")
        async with gateway(
            ctx, _config(storage_toml(home), fake.base_url, 0.2), env=ENV, home=home
        ):
            deadline = loop.time() + HOLD_TTL + 10
            while loop.time() < deadline:
                account = await store.get_account("told")
                if account is not None and account.held == 0 and account.open_holds == 0:
                    break
                await asyncio.sleep(0.05)
        charges = await ledger_charges(store, "acct_told")
        account = await store.get_account("told")
        mismatches = await store.reconcile()
    finally:
        await store.close()
        await fake.close()
    cli_status, _ = await reconcile_cli(home)
    kept = [t for t in told if charges.get(t[0]) == t[1]]
    lost = [t for t in told if t[0] not in charges]
    wrong = len(told) - len(kept) - len(lost)
    ages = [killed_at - t[2] for t in lost]
    books = (
        account is not None
        and (account.held, account.open_holds) == (0, 0)
        and account.balance == credits - sum(charges.values())
    )
    oldest = max(ages, default=0.0)
    return [
        Row(
            "SIGKILL under load: charges told to clients",
            f"{clients} clients streaming back to back for {seconds:g} s, then SIGKILL: "
            f"{len(told)} charges told; {len(kept)} in the ledger as told, {len(lost)} lost "
            f"(told {min(ages, default=0) * 1000:.0f}-{oldest * 1000:.0f} ms before the kill), "
            f"{wrong} charged otherwise; after the restart held 0: "
            f"{account is not None and account.held == 0}, balance = credits - ledger: {books}, "
            f"reconcile {len(mismatches)} mismatches, CLI exit {cli_status}",
            f"every charge told more than {BOUND * 1000:.0f} ms before the kill is in the "
            "ledger as told; none charged otherwise; the books reconcile",
            bool(told) and oldest <= BOUND and not wrong and books and not mismatches
            and cli_status == 0,
        )
    ]  # fmt: skip
