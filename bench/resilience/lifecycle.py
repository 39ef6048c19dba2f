"""Rows about the process: SIGKILL with live streams, shutdown, and output
guardrails on live streams (the last in :mod:`bench.resilience.lifecycle_guardrails`)."""

from __future__ import annotations

import asyncio
import json
import re
import signal
from collections import Counter
from pathlib import Path

from bench.resilience.harness import Context, Gateway, Row, gateway, row
from bench.resilience.lifecycle_guardrails import output_guardrails
from bench.resilience.lifecycle_support import (
    ENV,
    SHUTTING_DOWN,
    Live,
    hold_for,
    ledger_charges,
    open_stream,
    process_gone,
    read_rest,
    reconcile_cli,
    slow_stream,
    sqlite_store,
    sse_data,
    storage_toml,
    stream_body,
    wait_settled,
)
from tests.support.accounts import metered_key
from tests.support.fake_openai import DONE, completion, text_stream
from tests.support.fake_upstream import FakeUpstream, Pause, Reply, WaitFor
from tests.support.gateway import openai_connection_toml
from tests.support.raw_http import exchange, post

RECLAIMED = re.compile(r"reclaimed (\d+) expired credit holds")


# --- SIGKILL with live streams -------------------------------------------------------

HOLD_TTL = 2.0
RECLAIM_INTERVAL = 0.2


def _kill_config(home: Path, fake: FakeUpstream, reclaim_interval: float) -> str:
    return (
        storage_toml(home)
        + "[server]\nsse_keepalive_interval = 0\n"
        # one stored hold per request, whose fate the row reads (a killed process's
        # reservation is tests/server/test_money.py's)
        + f"[metering]\nhold_ttl = {HOLD_TTL}\nreclaim_interval = {reclaim_interval}\n"
        + "reserve = false\n"
        + openai_connection_toml(fake.base_url)
    )


@row("SIGKILL with 50 live streams")
async def sigkill_with_live_streams(ctx: Context) -> list[Row]:
    """``n`` metered streams hold credits when the process is killed, ``m / 2`` more
    finished and were settled before, and ``m / 2`` finished the moment before (their
    settlements may still be queued: settled once or reclaimed, never anything else).
    A new process on the same home reclaims every hold once it expires and the ledger
    reconciles. The first process has a long reclaim interval, so every reclaim is the
    restarted one's (a hold's expiry is fixed when it is placed, so both processes
    have the short ``hold_ttl``)."""
    n, m = ctx.n(10, 50), ctx.n(2, 10)
    body = stream_body(usage=True)
    hold = hold_for(body)
    credits = (n + m + 5) * hold
    fake = FakeUpstream()
    await fake.start()
    early, late = asyncio.Event(), asyncio.Event()
    done = text_stream("last", " words", usage={"prompt_tokens": 9, "completion_tokens": 2})
    fake.queue(*[Reply.stream(*done[:2], WaitFor(early), *done[2:]) for _ in range(m // 2)])
    fake.queue(*[Reply.stream(*done[:2], WaitFor(late), *done[2:]) for _ in range(m - m // 2)])
    fake.default = Reply.stream(*slow_stream(60, 0.1))
    home = ctx.home("sigkill")
    loop = asyncio.get_running_loop()
    store = await sqlite_store(home)
    try:
        async with gateway(
            ctx, _kill_config(home, fake, 3600), name="sigkill", env=ENV, home=home
        ) as gw:
            key = await metered_key(store, "killed", credits)
            finishing = [await open_stream(gw, body, key) for _ in range(m)]
            lives = [await open_stream(gw, body, key) for _ in range(n)]
            before = await store.get_account("killed")
            early.set()
            finished = [(await asyncio.wait_for(read_rest(f), 10))[0] for f in finishing[: m // 2]]
            await wait_settled(store, [f.request_id for f in finishing[: m // 2]])
            late.set()
            finished += [(await asyncio.wait_for(read_rest(f), 10))[0] for f in finishing[m // 2 :]]
            gw.kill(signal.SIGKILL)  # the moment the last [DONE] arrived
            killed_at = loop.time()
            for live in lives:
                await asyncio.wait_for(read_rest(live), 10)
            for live in [*finishing, *lives]:
                await live.client.close()
        # The harness finds a gateway's port in its log: the restart gets a log of its own.
        (home / "gateway.log").rename(home / "gateway-killed.log")
        fake.default = Reply.stream(*text_stream("fresh", " answer"))
        async with gateway(
            ctx, _kill_config(home, fake, RECLAIM_INTERVAL), name="sigkill", env=ENV, home=home
        ) as gw:
            up_at = loop.time()
            fresh = await exchange(gw.host, gw.port, post("/v1/chat/completions", body, key))
            fresh_id = fresh.headers.get("x-request-id", "")
            served = fresh.status == 200 and fresh.body.endswith(DONE)
            recovered_at = None
            while loop.time() < max(up_at, killed_at + HOLD_TTL) + 15:
                account = await store.get_account("killed")
                charged = await store.one(
                    "SELECT COUNT(*) FROM ledger WHERE request_id = ? AND kind = 'charge'",
                    (fresh_id,),
                )
                if account and account.held == 0 and account.open_holds == 0 and charged:
                    recovered_at = loop.time()
                    break
                await asyncio.sleep(0.05)
            log = gw.log_text()
        holds = {
            str(r[0]): (r[1], r[2])
            for r in await store.all(
                "SELECT request_id, released_at, charged FROM holds WHERE account_id = ?",
                ("acct_killed",),
            )
        }
        charges = await ledger_charges(store, "acct_killed")
        account = await store.get_account("killed")
        mismatches = await store.reconcile()
    finally:
        await store.close()
        await fake.close()
    cli_status, cli_out = await reconcile_cli(home)

    def fate(request_id: str) -> str:
        released, charged = holds.get(request_id, (None, None))
        if released is not None and charged == 0 and request_id not in charges:
            return "reclaimed"
        if released is not None and charged and charges.get(request_id) == charged:
            return "settled"
        return "wrong"

    live_fates = Counter(fate(live.request_id) for live in lives)
    early_fates = Counter(fate(f.request_id) for f in finishing[: m // 2])
    late_fates = Counter(fate(f.request_id) for f in finishing[m // 2 :])
    logged = sum(int(x) for x in RECLAIMED.findall(log))
    held_before = before.held if before else 0
    books = (
        account is not None
        and account.held == 0
        and account.open_holds == 0
        and account.balance == credits - sum(charges.values())
    )
    answered = sum(b.endswith(DONE) for b in finished)
    deadline = max(up_at, killed_at + HOLD_TTL) + RECLAIM_INTERVAL + 1.0
    recovery = (recovered_at - killed_at) if recovered_at is not None else float("inf")
    return [
        Row(
            f"SIGKILL with {n} live streams",
            f"{n} live streams and {m} finished ({answered} with [DONE]; {m // 2} before the "
            f"kill, {m - m // 2} at it), {held_before // hold} holds placed; restarted in "
            f"{up_at - killed_at:.1f} s, new request "
            f"{'served' if served else f'NOT served ({fresh.status})'}; live: "
            f"{live_fates['reclaimed']} of {n} holds reclaimed free, {live_fates['settled']} "
            f"charged; finished before: {early_fates['settled']} of {m // 2} settled; "
            f"finished at the kill: {late_fates['settled']} settled, {late_fates['reclaimed']} "
            f"reclaimed; {live_fates['wrong'] + late_fates['wrong'] + early_fates['wrong']} "
            f"inconsistent; {logged} reclaims logged, held 0 again {recovery:.1f} s after "
            f"the kill (hold_ttl {HOLD_TTL:g} s); held {account.held if account else '?'}, "
            f"balance = credits - ledger charges: {books}; reconcile {len(mismatches)} "
            f"mismatches, `sluice ledger reconcile` exit {cli_status}"
            + (f" ({cli_out[-200:]})" if cli_status else ""),
            "every live stream's hold reclaimed (nothing charged) by hold_ttl + "
            "reclaim_interval + 1 s (or the restart); each finished one settled once (or, "
            "finished at the kill, reclaimed); balance as the ledger says, reconcile clean "
            "(store and CLI); the restarted gateway serves",
            held_before == (n + m) * hold
            and answered == m
            and live_fates["reclaimed"] == n
            and early_fates["settled"] == m // 2
            and late_fates["wrong"] == 0
            and recovery <= deadline - killed_at
            and books
            and served
            and not mismatches
            and cli_status == 0,
        )
    ]


# --- shutdown with live streams ------------------------------------------------------

GRACE = 0.5
LATE = 1.5
"""Seconds past the grace period by which every cut stream must have its error event."""


async def _late_request(gw: Gateway, key: str, body: bytes) -> str:
    """What a request sent after SIGTERM gets: ``refused``, a status, or ``hung``."""
    try:
        response = await asyncio.wait_for(
            exchange(gw.host, gw.port, post("/v1/chat/completions", body, key)), GRACE + 3
        )
    except (ConnectionError, asyncio.IncompleteReadError):
        return "refused"
    except TimeoutError:
        return "hung"
    return str(response.status)


@row("shutdown with live streams")
async def shutdown_with_live_streams(ctx: Context) -> list[Row]:
    """SIGTERM with ``n`` live metered streams (half asked for usage), one whole answer
    still waiting for its upstream, and one stream that finishes within the grace
    period: the ``n`` end with ``server_shutting_down`` (no ``[DONE]``; usage, when
    asked, as the request log has it) by grace + 1.5 s, the waiting one gets a 503, the
    short one ends with ``[DONE]``, a request sent after SIGTERM is refused, the
    process exits, and the books are settled: each cut request logged ``shutdown``,
    nothing held, reconcile clean."""
    n = ctx.n(5, 50)
    fake = FakeUpstream()
    await fake.start()
    finish = asyncio.Event()
    short = text_stream("one", " two")
    waiting = Reply.json(completion("too late"))
    waiting.delay = 60
    fake.queue(Reply.stream(*short[:2], WaitFor(finish), Pause(0.1), *short[2:]), waiting)
    fake.default = Reply.stream(*slow_stream(60, 0.05))
    home = ctx.home("shutdown")
    config = (
        storage_toml(home)
        + f"[server]\nsse_keepalive_interval = 0\nshutdown_grace = {GRACE}\n"
        + openai_connection_toml(fake.base_url)
    )
    bodies = [stream_body(usage=i % 2 == 0) for i in range(n)]
    whole_body = json.loads(stream_body(usage=False))
    whole_body["stream"] = False
    whole = json.dumps(whole_body).encode()
    credits = (n + 5) * max(hold_for(b) for b in bodies)
    loop = asyncio.get_running_loop()
    store = await sqlite_store(home)
    try:
        async with gateway(ctx, config, name="shutdown", env=ENV, home=home) as gw:
            key = await metered_key(store, "stopped", credits)
            quick = await open_stream(gw, stream_body(usage=True, text="a short one"), key)
            upstream_calls = len(fake.requests)
            answer = asyncio.ensure_future(
                exchange(gw.host, gw.port, post("/v1/chat/completions", whole, key))
            )
            deadline = loop.time() + 10
            while len(fake.requests) == upstream_calls and loop.time() < deadline:
                await asyncio.sleep(0.01)  # the whole answer is waiting upstream
            lives = [await open_stream(gw, b, key) for b in bodies]
            gw.kill(signal.SIGTERM)
            term_at = loop.time()
            finish.set()

            async def ending(live: Live) -> tuple[bytes, bool, float]:
                body, complete = await asyncio.wait_for(read_rest(live), GRACE + 10)
                return body, complete, loop.time() - term_at

            reading = asyncio.gather(*(ending(live) for live in [quick, *lives]))
            await asyncio.sleep(GRACE / 2)  # the gateway has stopped listening by now
            late_outcome = await _late_request(gw, key, bodies[0])
            endings = await reading
            refused = await answer
            while not process_gone(gw.pid) and loop.time() < term_at + 30:
                await asyncio.sleep(0.02)
            exited = loop.time() - term_at if process_gone(gw.pid) else float("inf")
            for live in [quick, *lives]:
                await live.client.close()
        records = [await store.get_request(live.request_id, "acct_stopped") for live in lives]
        quick_record = await store.get_request(quick.request_id, "acct_stopped")
        whole_record = await store.get_request(
            refused.headers.get("x-request-id", ""), "acct_stopped"
        )
        account = await store.get_account("stopped")
        mismatches = await store.reconcile()
    finally:
        await store.close()
        await fake.close()
    quick_body, quick_complete, quick_took = endings[0]
    quick_ok = (
        quick_complete
        and quick_body.endswith(DONE)
        and quick_record is not None
        and quick_record.status == "complete"
    )
    whole_ok = (
        refused.status == 503
        and "retry-after" in refused.headers
        and b"server_shutting_down" in refused.body
        and whole_record is not None
        and whole_record.status == "shutdown"
    )
    good = with_usage = 0
    slowest = 0.0
    for i, ((body, complete, took), record) in enumerate(zip(endings[1:], records, strict=True)):
        events = sse_data(body)
        last = json.loads(events[-1]) if events and events[-1] != b"[DONE]" else {}
        usage = last.get("usage") or {}
        usage_ok = bool(
            i % 2
            or (
                usage.get("completion_tokens", 0) > 0
                and record is not None
                and (usage.get("prompt_tokens"), usage.get("completion_tokens"))
                == (record.prompt_tokens, record.completion_tokens)
            )
        )
        with_usage += i % 2 == 0 and usage_ok
        slowest = max(slowest, took)
        good += bool(
            complete
            and last.get("error") == SHUTTING_DOWN
            and b"[DONE]" not in events
            and usage_ok
            and took <= GRACE + LATE
            and record is not None
            and record.status == "shutdown"
        )
    settled = account is not None and account.held == 0 and account.open_holds == 0
    charged = credits - account.balance if account else 0
    return [
        Row(
            f"shutdown with {n} live streams",
            f"SIGTERM (shutdown_grace {GRACE:g} s): {good} of {n} streams ended with "
            f"server_shutting_down, no [DONE], logged shutdown ({with_usage} of "
            f"{(n + 1) // 2} asking for usage got it, equal to the log's), the last "
            f"{slowest:.2f} s after SIGTERM; the whole answer waiting upstream: "
            f"{refused.status}{' logged shutdown' if whole_ok else ' (NOT as expected)'}; the "
            f"stream finishing within the grace period "
            f"{'ended with [DONE]' if quick_ok else 'did NOT end well'} ({quick_took:.2f} s); "
            f"a request after SIGTERM: {late_outcome}; process exited after {exited:.2f} s; "
            f"held {account.held if account else '?'} in "
            f"{account.open_holds if account else '?'} open holds, ${charged / 1e9:.6f} "
            f"charged; reconcile {len(mismatches)} mismatches",
            "every stream ends with server_shutting_down (usage when asked, as logged), no "
            f"[DONE], by grace + {LATE:g} s, logged shutdown; a waiting whole answer gets 503; "
            "one finishing within grace ends with [DONE]; a request after SIGTERM is refused "
            "or 503, not hung; the process exits; nothing held, reconcile clean",
            good == n
            and quick_ok
            and whole_ok
            and late_outcome in {"refused", "503"}
            and exited <= GRACE + 5
            and settled
            and charged > 0
            and not mismatches,
        )
    ]


@row("output guardrails on live streams")
async def output_guardrails_on_live_streams(ctx: Context) -> list[Row]:
    return await output_guardrails(ctx)
