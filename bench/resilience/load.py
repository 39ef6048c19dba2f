"""Rows about hostile load: slow readers, slowloris, hostile uploads.

Each row measures the gateway under attack against the same gateway without it, in
one sitting (latency is compared as a ratio with a margin: other work on the machine
moves both sides). The load generators run here, in the harness process; the gateway
runs in its own process (pinned to a core when the harness can).
"""

from __future__ import annotations

import asyncio
import json
import random
import socket
import time
from dataclasses import dataclass

from bench.resilience.harness import MIB, Context, Gateway, Row, gateway, percentile, row
from bench.resilience.load_support import (
    Probe,
    RssPeak,
    SinkUpstream,
    Slowloris,
    big_stream,
    closed_by,
    probe,
    raw_socket,
    tcp_queues,
    warm_streams,
)
from tests.support.fake_openai import text_stream
from tests.support.fake_upstream import FakeUpstream, Reply
from tests.support.gateway import UPSTREAM_KEY, openai_connection_toml
from tests.support.raw_http import post

ENV = {"FAKE_UPSTREAM_KEY": UPSTREAM_KEY}
STREAM = json.dumps(
    {"model": "test/gpt-fake", "stream": True, "messages": [{"role": "user", "content": "hi"}]}
).encode()


def tier_seconds(ctx: Context, fast: float, full: float) -> float:
    """A duration for this tier."""
    return fast if ctx.tier == "fast" else full


def ms(seconds: float) -> str:
    return f"{seconds * 1000:.1f} ms"


def failures_text(found: Probe) -> str:
    return ", ".join(f"{n} x {k}" for k, n in sorted(found.failures.items())) or "none"


# -- slow readers ----------------------------------------------------------------------

WRITE_TIMEOUT = 3.0
WRITE_BUFFER = 64 * 1024
SOCKET_BUFFER = 16 * 1024
UPSTREAM_SOCKET_BUFFER = 64 * 1024
READ_BUFFER = 64 * 1024
PER_READER_BOUND = 512 * 1024
"""What one stalled stream may hold in the gateway: the write buffer (64 KiB), an
upstream read buffer of two reads (2 x 64 KiB), one upstream read and its translation
in flight (2 x 64 KiB), the request's own state (~64 KiB): 384 KiB; 512 KiB leaves
room for the allocator."""
CUT_SLACK = 2.0


@dataclass
class Stall:
    """One wave of stalled readers, as measured."""

    growth: int  # gateway RSS, peak minus before
    sent: int  # body bytes the upstream wrote, in all
    unread: int  # of them, queued in the gateway's kernel receive buffers
    unsent: int  # written by the upstream, queued in its own send buffers
    cuts: list[float]  # seconds from each request to its connection's close
    open_left: int  # connections the gateway had not closed at the end
    hangups: int  # upstream calls the upstream saw hung up
    upstream_open: int  # upstream connections still established after the cuts
    left: int  # bytes still queued unread in the gateway's receive buffers after them


async def _stall(gw: Gateway, fake: FakeUpstream, n: int) -> Stall:
    loop = asyncio.get_running_loop()
    request = post("/v1/chat/completions", STREAM, gw.key)
    sent_before, hangups_before = fake.sent_bytes, len(fake.hangups)
    socks: list[socket.socket] = []
    sent_at: list[float] = []
    before = gw.rss_bytes()
    try:
        async with RssPeak(gw) as peak:
            for _ in range(n):
                sock = await raw_socket(gw, rcvbuf=4096)
                socks.append(sock)
                await loop.sock_sendall(sock, request)
                sent_at.append(time.monotonic())
            await asyncio.sleep(min(1.0, WRITE_TIMEOUT / 2))  # every stream stalled by now
            unread, unsent, _ = tcp_queues(fake.port)
            closed = await closed_by(gw.port, socks, sent_at[-1] + WRITE_TIMEOUT + 15)
    finally:
        for sock in socks:
            sock.close()
    await asyncio.sleep(0.3)  # the upstream calls are closed and seen hung up
    left, _, upstream_open = tcp_queues(fake.port)
    return Stall(
        growth=peak.peak - before,
        sent=fake.sent_bytes - sent_before,
        unread=unread,
        unsent=unsent,
        cuts=[c - s for c, s in zip(closed, sent_at, strict=True) if c is not None],
        open_left=closed.count(None),
        hangups=len(fake.hangups) - hangups_before,
        upstream_open=upstream_open,
        left=left,
    )


@row("slow readers")
async def slow_readers(ctx: Context) -> list[Row]:
    """N clients ask for a ~10 MB stream (sent as fast as the gateway takes it) and never
    read (4 KiB SO_RCVBUF, set before connecting). Where the bytes went: the gateway's
    RSS, its kernel receive queues, the upstream's send queues (/proc/net/tcp). Each
    must be cut after client_write_timeout, its upstream connection closed; the full
    tier runs a second wave (memory the first freed is reused, not leaked)."""
    n = ctx.n(10, 100)
    waves = ctx.n(1, 2)
    fake = FakeUpstream()
    await fake.start()
    fake.queue(Reply.stream(*text_stream("warm", " up")))
    fake.default = Reply.stream(*big_stream())
    config = (
        f"[server]\nsse_keepalive_interval = 0\nclient_write_timeout = {WRITE_TIMEOUT}\n"
        f"client_write_buffer_bytes = {WRITE_BUFFER}\n"
        f"client_socket_buffer_bytes = {SOCKET_BUFFER}\n"
        f"upstream_socket_buffer_bytes = {UPSTREAM_SOCKET_BUFFER}\n"
        + openai_connection_toml(fake.base_url)
    )
    try:
        async with gateway(ctx, config, name="slow-readers", env=ENV) as gw:
            await warm_streams(gw, STREAM)
            await asyncio.sleep(0.3)
            baseline = gw.rss_bytes()
            stalls = [await _stall(gw, fake, n) for _ in range(waves)]
            after = gw.rss_bytes()
    finally:
        await fake.close()
    first = stalls[0]
    per_reader = first.growth / n
    cuts = [c for s in stalls for c in s.cuts]
    late = WRITE_TIMEOUT + CUT_SLACK
    on_time = sum(WRITE_TIMEOUT <= c <= late for c in cuts)
    again = (
        f"; a second wave +{stalls[1].growth / MIB:.1f} MiB more (freed memory reused)"
        if len(stalls) > 1
        else ""
    )
    total = waves * n
    hangups = sum(s.hangups for s in stalls)
    whole = " (the others had written their whole stream into kernel buffers)"
    whole = whole if hangups < total else ""
    return [
        Row(
            f"slow readers: {n} stalled streams, gateway memory",
            f"RSS +{first.growth / MIB:.1f} MiB at peak over {baseline / MIB:.0f} MiB = "
            f"{per_reader / 1024:.0f} KiB per stalled reader{again}; "
            f"{(after - baseline) / MIB:+.1f} MiB after the cuts (write buffer "
            f"{WRITE_BUFFER // 1024} KiB, SO_SNDBUF {SOCKET_BUFFER // 1024} KiB, upstream "
            f"SO_RCVBUF {UPSTREAM_SOCKET_BUFFER // 1024} KiB, client SO_RCVBUF 4 KiB)",
            f"<= {PER_READER_BOUND // 1024} KiB per stalled reader (write buffer + 2 upstream "
            f"reads of {READ_BUFFER // 1024} KiB + one read translated + request state)",
            per_reader <= PER_READER_BOUND,
        ),
        Row(
            f"slow readers: {n} stalled streams, cut and upstream",
            f"{on_time} of {total} cut {WRITE_TIMEOUT:g}-{late:g} s after their request "
            f"(cuts at {min(cuts, default=0):.2f}-{max(cuts, default=0):.2f} s, "
            f"{sum(s.open_left for s in stalls)} never); the upstream saw "
            f"{hangups} hang-ups{whole} and wrote {first.sent / n / 1e6:.2f} MB per ~10 MB "
            f"stream: {first.unread / n / 1e6:.2f} MB of it queued unread in the gateway's "
            f"kernel receive buffer, {first.unsent / n / 1e6:.2f} MB in the upstream's send "
            f"buffer; after the cuts {sum(s.upstream_open for s in stalls)} upstream "
            f"connections open, {sum(s.left for s in stalls)} bytes queued "
            f"(client_write_timeout {WRITE_TIMEOUT:g} s)",
            f"every stalled reader cut {WRITE_TIMEOUT:g} s (+ <= {CUT_SLACK:g} s) after its "
            "request, and its upstream connection closed",
            on_time == total and not any(s.upstream_open or s.left for s in stalls),
        ),
    ]


# -- slowloris -------------------------------------------------------------------------

HEADER_TIMEOUT = 2.0
CUT_MARGIN = 1.0


@row("slowloris")
async def slowloris(ctx: Context) -> list[Row]:
    """220 connections trickle a request head (a byte every 0.5-1 s, a new connection
    when cut) while 4 clients send small requests; calm and attacked phases alternate.
    Each attacking connection must be answered 408 and cut at header_timeout."""
    n = ctx.n(220, 220)
    rounds = ctx.n(3, 6)  # calm and attacked phases alternate: noise hits both
    calm, attacked = tier_seconds(ctx, 1.0, 3.0), tier_seconds(ctx, 2.5, 5.0)
    rng = random.Random(ctx.seed)
    sink = SinkUpstream()
    await sink.start()
    config = (
        f"[server]\nsse_keepalive_interval = 0\nheader_timeout = {HEADER_TIMEOUT}\n"
        + openai_connection_toml(sink.base_url)
    )
    base, under = Probe(), Probe()
    lives: list[float] = []
    statuses: dict[str, int] = {}
    oldest = 0.0
    try:
        async with gateway(ctx, config, name="slowloris", env=ENV) as gw:
            await probe(gw, 0.5, 4)  # warm
            for _ in range(rounds):
                base.extend(await probe(gw, calm, 4))
                attack = Slowloris(gw, n, rng)
                attack.start()
                await attack.ready()
                under.extend(await probe(gw, attacked, 4))
                oldest = max(oldest, await attack.stop())
                lives += attack.lives
                for status, count in attack.statuses.items():
                    statuses[status] = statuses.get(status, 0) + count
    finally:
        await sink.close()
    p99_base, p99_under = percentile(base.latencies, 99), percentile(under.latencies, 99)
    latency_bound = 2 * p99_base + 0.005
    low, high = HEADER_TIMEOUT - 0.05, HEADER_TIMEOUT + CUT_MARGIN
    on_time = sum(low <= life <= high for life in lives)
    answered = ", ".join(f"{k}: {v}" for k, v in sorted(statuses.items()))
    return [
        Row(
            f"slowloris: {n} connections, legitimate latency",
            f"p99 {ms(p99_under)} under attack vs {ms(p99_base)} without "
            f"({p99_under / max(p99_base, 1e-9):.2f}x; p50 "
            f"{ms(percentile(under.latencies, 50))} vs {ms(percentile(base.latencies, 50))}, "
            f"max {ms(max(under.latencies, default=0))} vs {ms(max(base.latencies, default=0))}; "
            f"{len(under.latencies)} and {len(base.latencies)} requests, 4 clients, "
            f"{rounds} rounds in one sitting); failed: {failures_text(under)}",
            "p99 under attack <= 2 x p99 without + 5 ms; no legitimate request fails",
            p99_under <= latency_bound and not under.failures and not base.failures,
        ),
        Row(
            f"slowloris: {n} connections cut by header_timeout",
            f"{len(lives)} connections cut, {on_time} of them {low:.2f}-{high:.1f} s after "
            f"their first byte (lived {min(lives, default=0):.2f}-{max(lives, default=0):.2f} s;"
            f" answered {answered or 'nothing'}); oldest still open at the end {oldest:.2f} s",
            f"every one cut {HEADER_TIMEOUT:g} s (+ <= {CUT_MARGIN:g} s) after its first byte, "
            f"with a 408; at least {n} cuts; none outlives it",
            bool(lives)
            and on_time == len(lives) >= n
            and set(statuses) == {"408"}
            and oldest <= high,
        ),
    ]
