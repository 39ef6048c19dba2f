"""Rows about hostile uploads: fifty bodies of 15 MiB at once beside legitimate traffic.

Each kind of attack runs on a gateway of its own with the default intake bounds, measured
against the same gateway without it, in one sitting. The load generators run here, in the
harness process; the gateway runs in its own process.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field

from bench.resilience.harness import MIB, Context, Gateway, Row, gateway, median, percentile, row
from bench.resilience.load import ENV, failures_text, ms, tier_seconds
from bench.resilience.load_support import (
    Probe,
    RssPeak,
    SinkUpstream,
    Upload,
    probe,
    upload,
    upload_body,
)
from tests.support.gateway import openai_connection_toml

UPLOAD_BYTES = 15 * MIB
BUFFERED = 64 * MIB  # max_buffered_body_bytes, the default


@dataclass
class Hostile:
    """One kind of upload attack, as measured on a gateway of its own."""

    how: str
    uploads: list[Upload]
    rounds: int
    most_served: int  # in one round
    growth: int  # RSS, peak minus before the first round
    base: Probe
    under: Probe
    alone: float = 0.0  # seconds one upload takes to be served with nothing else going on
    alone_cpu: float = 0.0  # the gateway's CPU seconds for serving it (median of three)
    cpu: float = 0.0  # the gateway's CPU seconds for the attack in its busiest round
    costs: list[tuple[float, int]] = field(default_factory=list)
    """Per round: the gateway's CPU seconds for the attack, and the bytes it read."""

    @property
    def refused(self) -> list[Upload]:
        """Answered 503 server_busy + Retry-After (how early: their ``after``; what the
        client had written by then says little as fast, its kernel takes megabytes)."""
        return [u for u in self.uploads if u.busy]

    @property
    def other(self) -> int:
        return len(self.uploads) - len(self.refused) - sum(u.status == 200 for u in self.uploads)

    @property
    def p99(self) -> tuple[float, float]:
        return percentile(self.base.latencies, 99), percentile(self.under.latencies, 99)


async def _hostile(ctx: Context, n: int, seconds: float, rounds: int) -> Hostile:
    sink = SinkUpstream()
    await sink.start()
    config = "[server]\nsse_keepalive_interval = 0\n" + openai_connection_toml(sink.base_url)
    body = upload_body(UPLOAD_BYTES)
    how = f"trickled over {seconds:g} s" if seconds else "as fast as possible"
    found = Hostile(how, [], rounds, 0, 0, Probe(), Probe())
    try:
        async with gateway(ctx, config, name="hostile-uploads", env=ENV) as gw:
            await probe(gw, 0.5, 4)  # warm
            await asyncio.sleep(0.2)
            baseline = gw.rss_bytes()
            found.alone, found.alone_cpu = await _alone(gw, body)
            for _ in range(rounds):
                cpu = gw.cpu_seconds()
                base = await probe(gw, tier_seconds(ctx, 1.0, 4.0), 4)
                per_probe = (gw.cpu_seconds() - cpu) / max(1, len(base.latencies))
                found.base.extend(base)
                cpu, read = gw.cpu_seconds(), gw.bytes_read()
                async with RssPeak(gw) as peak:
                    attack = asyncio.gather(*(upload(gw, body, seconds) for _ in range(n)))
                    under = await probe(gw, 300, 4, until=attack)
                    uploads = await attack
                probes = per_probe * len(under.latencies)  # the legitimate requests' own work
                found.costs.append((gw.cpu_seconds() - cpu - probes, gw.bytes_read() - read))
                found.cpu = max(c for c, _ in found.costs)
                found.under.extend(under)
                found.uploads += uploads
                found.most_served = max(found.most_served, sum(u.status == 200 for u in uploads))
                found.growth = max(found.growth, peak.peak - baseline)
    finally:
        await sink.close()
    return found


async def _alone(gw: Gateway, body: bytes) -> tuple[float, float]:
    """Seconds one upload takes with nothing else going on (the median of three, one
    after another), and the gateway's CPU seconds for one (their mean: CPU time comes
    in 10 ms ticks)."""
    times = []
    cpu = gw.cpu_seconds()
    for _ in range(3):
        times.append((await upload(gw, body, 0.0)).after)
    return median(times), (gw.cpu_seconds() - cpu) / 3


@row("hostile uploads")
async def hostile_uploads(ctx: Context) -> list[Row]:
    """50 uploads of 15 MiB (valid chat requests, one long message) at once, beside
    small legitimate requests; trickled (every body in flight together) and as fast as
    the gateway reads, each on a gateway of its own with the default intake bounds."""
    n = 50
    trickled = await _hostile(ctx, n, tier_seconds(ctx, 2.0, 5.0), ctx.n(1, 2))
    fast = await _hostile(ctx, n, 0.0, ctx.n(1, 3))
    both = (trickled, fast)
    large = BUFFERED * 7 // 8  # what bodies over 1 MiB may fill (docs/security.md)
    fits = large // UPLOAD_BYTES
    rss_bound = 4 * large + 30 * MIB

    def shed(h: Hostile) -> str:
        refused = h.refused
        return (
            f"{h.how}: of {len(h.uploads)} ({h.rounds} rounds) "
            f"{sum(u.status == 200 for u in h.uploads)} served (at most {h.most_served} a "
            f"round), {len(refused)} refused, answered {ms(median([u.after for u in refused]))}"
            f" p50 / {ms(max((u.after for u in refused), default=0))} max after the head with "
            f"<= {max((u.sent for u in refused), default=0) / MIB:.2f} MiB of the body sent, "
            f"{h.other} other"
        )

    def latency(h: Hostile) -> str:
        base, under = h.p99
        return (
            f"{h.how}: p99 {ms(under)} during vs {ms(base)} before (max "
            f"{ms(max(h.under.latencies, default=0))} vs {ms(max(h.base.latencies, default=0))}) "
            f"({len(h.under.latencies)} and {len(h.base.latencies)} requests; failed: "
            f"{failures_text(h.under)}; the attack's CPU in the busiest round {ms(h.cpu)})"
        )

    def latency_ok(h: Hostile) -> bool:
        base, under = h.p99
        bound = 3 * base + 0.010 + 1.5 * h.cpu
        return under <= bound and not h.under.failures and not h.base.failures

    def cost(h: Hostile) -> str:
        per_mib = [f"{ms(c / max(1, r) * MIB)} over {r / MIB:.0f} MiB" for c, r in h.costs]
        return (
            f"{h.how}: per MiB read, {', '.join(per_mib)} a round (the legitimate requests' "
            f"own CPU, measured before, taken out); an upload served alone: "
            f"{ms(h.alone_cpu / UPLOAD_BYTES * MIB)} ({ms(h.alone_cpu)} for its 15 MiB, "
            f"{ms(h.alone)} wall)"
        )

    def cost_ok(h: Hostile) -> bool:
        alone = max(h.alone_cpu, 0.010) / UPLOAD_BYTES
        return all(cpu <= 2 * alone * read for cpu, read in h.costs)

    return [
        Row(
            f"hostile uploads: {n} x {UPLOAD_BYTES // MIB} MiB at once, refused early",
            "; ".join(shed(h) for h in both),
            f"every upload served or refused with 503 server_busy + Retry-After (uploads may "
            f"hold 7/8 of max_buffered_body_bytes "
            f"{BUFFERED // MIB} MiB = {fits} of them at once; a served one gives its bytes "
            "back when it ends, so more than that may be served in a round)",
            all(h.other == 0 and h.refused for h in both),
        ),
        Row(
            f"hostile uploads: {n} x {UPLOAD_BYTES // MIB} MiB at once, gateway memory",
            "; ".join(f"{h.how}: RSS +{h.growth / MIB:.0f} MiB at peak" for h in both),
            f"<= 4 x the {large // MIB} MiB uploads may hold + 30 MiB = {rss_bound / MIB:.0f} "
            "MiB, whatever the number of uploads (an admitted body is resident up to about 3 "
            "times while decoded and re-encoded for the upstream, plus the allocator's slack)",
            all(h.growth <= rss_bound for h in both),
        ),
        Row(
            f"hostile uploads: {n} x {UPLOAD_BYTES // MIB} MiB at once, legitimate latency",
            "; ".join(latency(h) for h in both),
            "p99 during <= 3 x p99 before + 10 ms + 1.5 x the gateway's CPU time for the "
            "attack in its busiest round (legitimate requests wait at most for the work the "
            "attack made the gateway's one core do, with room for the scheduler), in one "
            "sitting; none fails",
            all(latency_ok(h) for h in both),
        ),
        Row(
            f"hostile uploads: {n} x {UPLOAD_BYTES // MIB} MiB at once, gateway CPU",
            "; ".join(cost(h) for h in both),
            "per byte it read, an attack costs the gateway at most twice the CPU of an upload "
            "served alone (a refused upload's bytes are read and dropped, what its kernel "
            "sent before the 503 too, so the answer is not reset: that must stay cheap; a "
            "trickled body comes in more, smaller reads)",
            all(cost_ok(h) for h in both),
        ),
    ]
