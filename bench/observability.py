"""Observability's cost: streamed req/s, added TTFC and CPU per answer with metrics
scraping, JSON logs and tracing on, beside all of them off, in one sitting.

    .venv/bin/python -m bench.observability [--reps 5] [--duration 2] [--concs 1 32 64]

Issue 15's proof, on the peer kit (``../shared/bench`` or ``--kit``/``KIT``; without
it, this repository's ``bench/fake_upstream.py``, the same stream). Core 0 runs the
fake upstream, a tiny OTLP/HTTP collector (``bench/otlp_collector.py``) and
the load generator of ``bench/loadgen.py``; core 1 runs six ``sluice serve``
processes over ``bench/sluice-bench.toml``, one per variant, each with its own home and
the same admin key:

* ``off``: ``--log-level warning`` (no access lines), nobody reads ``/metrics``, no
  ``[telemetry]``;
* ``metrics``: ``/metrics`` fetched once a second with the admin key while the run
  lasts (the gateway counts its metrics in process always: this measures the scrape);
* ``json-logs``: ``--log-format json --log-level info``, stderr to a file, one access
  line per request;
* ``tracing``: ``[telemetry] otlp_endpoint`` pointing at the collector;
* ``tracing-10%``: the same with ``sample_ratio = 0.1``;
* ``all``: the three together.

Every rep runs streamed ``/v1/chat/completions`` through each variant at each
concurrency, the variants back to back in an order that rotates every rep. Prints the
medians (min-max) over the reps, each variant against ``off`` as the median of the
reps' ratios, and what each observer received: access lines, spans, scrapes.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import gc
import json
import os
import re
import secrets
import statistics
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import aiohttp
import uvloop

from bench.loadgen import (
    CHAT_PATH,
    CHAT_TEXT,
    HOST,
    PROMPT,
    ROOT,
    UPSTREAM_PORT,
    Results,
    Target,
    column,
    connect,
    kit_upstream,
    log_run,
    measure,
    med,
    pinned,
    sitting_args,
    started,
)
from bench.otlp_collector import COLLECTOR_PORT, collector_stats, final_stats

FIRST_PORT = 8790  # the variants' gateways listen on 8790, 8791, ...
FLUSH_WAIT = 3.0  # seconds a tracing run's last spans may take to reach the collector
ACCESS_LINE = b'"logger":"sluice.access"'
CHAT_LINE = b'"path":"/v1/chat/completions"'
SERVED = re.compile(r'^sluice_requests_total\{[^}]*path="([^"]*)"[^}]*\} (\S+)$', re.MULTILINE)


@dataclass(frozen=True)
class Variant:
    """One gateway's observers: who reads its metrics, how it logs, whether it traces."""

    name: str
    scrape: bool = False
    json_logs: bool = False
    tracing: bool = False
    sample_ratio: float = 1.0
    """``[telemetry] sample_ratio`` of a tracing variant."""


VARIANTS = (
    Variant("off"),
    Variant("metrics", scrape=True),
    Variant("json-logs", json_logs=True),
    Variant("tracing", tracing=True),
    Variant("tracing-10%", tracing=True, sample_ratio=0.1),
    Variant("all", scrape=True, json_logs=True, tracing=True),
)


@dataclass
class Gateway:
    """A running variant: its port, pid, home (dev key, stderr) and its scrapes."""

    variant: Variant
    port: int
    home: Path
    pid: int = 0
    scrapes: int = 0
    scraped_bytes: int = 0
    target: Target | None = None

    @property
    def stderr(self) -> Path:
        return self.home / "stderr.log"


def config_file(variant: Variant, home: Path) -> Path:
    """The bench config, with ``[telemetry]`` for a tracing variant (its own service
    name, so the collector tells the two tracing gateways apart)."""
    text = (ROOT / "bench" / "sluice-bench.toml").read_text()
    if variant.tracing:
        text += (
            f'\n[telemetry]\notlp_endpoint = "http://{HOST}:{COLLECTOR_PORT}/v1/traces"\n'
            f'service_name = "sluice-{variant.name}"\n'
            f"sample_ratio = {variant.sample_ratio}\n"
        )
    path = home / "sluice.toml"
    path.write_text(text)
    return path


def gateway_argv(gw: Gateway) -> list[str]:
    serve = ["serve", "--config", str(config_file(gw.variant, gw.home))]
    serve += ["--home", str(gw.home), "--port", str(gw.port)]
    if gw.variant.json_logs:
        serve += ["--log-format", "json", "--log-level", "info"]
    else:
        serve += ["--log-level", "warning"]
    return pinned(1, [str(Path(sys.executable).parent / "sluice"), *serve])


def chat_target(gw: Gateway) -> Target:
    """The streamed chat request to ``gw``, prebuilt, with its dev key."""
    key = (gw.home / "dev-key").read_text().strip()
    body = json.dumps({"model": "fake-model", "stream": True, "messages": PROMPT})
    lines = [f"POST {CHAT_PATH} HTTP/1.1", f"host: {HOST}:{gw.port}"]
    lines += ["content-type: application/json", f"authorization: Bearer {key}"]
    lines += [f"content-length: {len(body.encode())}"]
    request = ("\r\n".join(lines) + "\r\n\r\n" + body).encode()
    return Target(gw.variant.name, gw.port, request, CHAT_TEXT, gw.pid)


async def scrape_metrics(session: aiohttp.ClientSession, gw: Gateway, admin: str) -> str:
    """One ``GET /metrics`` with the admin key; its text (stops the bench if not 200)."""
    url = f"http://{HOST}:{gw.port}/metrics"
    async with session.get(url, headers={"authorization": f"Bearer {admin}"}) as resp:
        body = await resp.read()
        if resp.status != 200:
            raise SystemExit(f"{gw.variant.name}: /metrics answered {resp.status}")
    return body.decode()


async def scraper(session: aiohttp.ClientSession, gw: Gateway, admin: str) -> None:
    """``/metrics`` once a second, on the second, until cancelled."""
    due = time.perf_counter()
    while True:
        gw.scraped_bytes += len(await scrape_metrics(session, gw, admin))
        gw.scrapes += 1
        due += 1.0
        await asyncio.sleep(max(0.0, due - time.perf_counter()))


@dataclass
class Sitting:
    gateways: list[Gateway]
    admin: str
    args: argparse.Namespace
    results: Results = field(default_factory=dict)

    async def run(self) -> None:
        """A probe of every gateway (200 with text), then every rep: at each
        concurrency, each variant once, the order rotated by one every rep."""
        async with aiohttp.ClientSession() as session:
            for gw in self.gateways:
                await self._probe(session, gw)
            for rep in range(self.args.reps):
                turn = rep % len(self.gateways)
                order = self.gateways[turn:] + self.gateways[:turn]
                for conc in self.args.concs:
                    for gw in order:
                        await self._once(session, gw, conc, rep + 1)

    async def _probe(self, session: aiohttp.ClientSession, gw: Gateway) -> None:
        gw.target = chat_target(gw)
        conn = await connect(gw.target)
        sample = await asyncio.wait_for(conn.send(gw.target.request), 10)
        conn.close()
        if not sample.ok:
            raise SystemExit(f"{gw.variant.name}: no streamed text in the answer (or not 200)")
        if gw.variant.scrape:
            await scrape_metrics(session, gw, self.admin)

    async def _once(self, session: aiohttp.ClientSession, gw: Gateway, conc: int, rep: int) -> None:
        assert gw.target is not None
        gc.collect()
        scraping = (
            asyncio.create_task(scraper(session, gw, self.admin)) if gw.variant.scrape else None
        )
        try:
            row = await measure(gw.target, conc, self.args.duration, self.args.warmup)
        finally:
            if scraping is not None:
                scraping.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await scraping
        self.results.setdefault((gw.variant.name, conc), []).append(row)
        log_run(gw.variant.name, conc, rep, row, self.args.raw, label="variant")
        if gw.variant.tracing:
            await self._flushed(session, gw)

    async def _flushed(self, session: aiohttp.ClientSession, gw: Gateway) -> None:
        """Wait (up to 3 s) until the collector holds two spans (the request's, its
        try's) per chat answer ``gw`` served, so that its exports do not land in the
        next variant's window."""
        want = 2 * await served(session, gw, self.admin) * gw.variant.sample_ratio
        if gw.variant.sample_ratio < 1:  # sampled: about that many (well within 20 %)
            want *= 0.8
        deadline = time.perf_counter() + FLUSH_WAIT
        while time.perf_counter() < deadline:
            spans = (await collector_stats(session)).spans
            if spans.get(f"sluice-{gw.variant.name}", 0) >= want:
                return
            await asyncio.sleep(0.05)
        print(f"{gw.variant.name}: spans still missing after {FLUSH_WAIT:g} s", file=sys.stderr)

    async def served(self) -> dict[str, int]:
        """Each gateway's own count of the chat answers it served, once the sitting is over."""
        async with aiohttp.ClientSession() as session:
            return {gw.variant.name: await served(session, gw, self.admin) for gw in self.gateways}


async def served(session: aiohttp.ClientSession, gw: Gateway, admin: str) -> int:
    """The chat answers ``gw`` counted (``sluice_requests_total``), through ``/metrics``."""
    found = SERVED.findall(await scrape_metrics(session, gw, admin))
    return round(sum(float(n) for path, n in found if path == CHAT_PATH))


def vs_off(results: Results, name: str, conc: int, key: str) -> float:
    """``name`` over ``off``, minus one: the median of the reps' ratios (the two runs of a
    rep are seconds apart, so the machine's drift mostly cancels)."""
    pairs = zip(
        column(results, name, conc, key, "off"),
        column(results, "off", conc, key, "off"),
        strict=True,
    )
    return statistics.median(a / b for a, b in pairs) - 1


def spread_ms(values: Sequence[float]) -> str:
    """Signed milliseconds: median (min-max)."""
    if not values:
        return "\u2014"
    mid, low, high = (f(values) for f in (statistics.median, min, max))
    return f"{mid:+.3f} ({low:+.2f}\u2013{high:+.2f})"


def figures_table(results: Results, concs: Sequence[int]) -> list[str]:
    c = concs[0]
    cols = [f"stream rps c={n}" for n in concs] + [f"CPU µs/req c={n}" for n in concs]
    cols += [f"TTFC p50 / p99 c={c}", f"added TTFC p50 c={c}", f"added TTFC p99 c={c}"]
    lines = [f"| variant | {' | '.join(cols)} | errors |", "|---" * (len(cols) + 2) + "|"]
    for v in VARIANTS:
        n = v.name
        cells = [med(column(results, n, k, "rps", "off")) for k in concs]
        cells += [
            f"{statistics.median(column(results, n, k, 'cpu_us', 'off')):,.0f}" for k in concs
        ]
        p50, p99 = (
            statistics.median(column(results, n, c, f"ttfc_{p}_ms", "off")) for p in ("p50", "p99")
        )
        cells.append(f"{p50:.2f} / {p99:.2f} ms")
        for p in ("p50", "p99"):
            cells.append(
                "\u2014"
                if n == "off"
                else spread_ms(column(results, n, c, f"added ttfc_{p}_ms", "off"))
            )
        errors = sum(row["errors"] for k in concs for row in results.get((n, k), []))
        lines.append(f"| {n} | {' | '.join(cells)} | {errors:.0f} |")
    return lines


def cost_table(results: Results, concs: Sequence[int]) -> list[str]:
    cols = [f"rps c={n}" for n in concs] + [f"CPU/req c={n}" for n in concs]
    lines = [f"| vs off, per rep | {' | '.join(cols)} |", "|---" * (len(cols) + 1) + "|"]
    for v in VARIANTS[1:]:
        cells = [f"{vs_off(results, v.name, n, k):+.1%}" for k in ("rps", "cpu_us") for n in concs]
        lines.append(f"| {v.name} | {' | '.join(cells)} |")
    return lines


@dataclass(frozen=True)
class Received:
    """What the observers got: the gateways' own request counts, access lines, spans."""

    served: dict[str, int]
    lines: dict[str, int]
    spans: dict[str, int]
    posts: int
    otlp_bytes: int


def received_table(gateways: Sequence[Gateway], got: Received) -> list[str]:
    lines = [
        "| variant | chat answers served | their JSON access lines | spans received | scrapes |"
    ]
    lines.append("|---|---:|---:|---:|---:|")
    for gw in gateways:
        n = gw.variant.name
        access = f"{got.lines[n]:,}" if gw.variant.json_logs else "\u2014"
        spans = f"{got.spans.get(f'sluice-{n}', 0):,}" if gw.variant.tracing else "\u2014"
        each = gw.scraped_bytes / max(gw.scrapes, 1) / 1e3
        scrapes = f"{gw.scrapes:,} ({each:.0f} kB each)" if gw.variant.scrape else "\u2014"
        lines.append(f"| {n} | {got.served[n]:,} | {access} | {spans} | {scrapes} |")
    size = got.otlp_bytes / 1e6
    lines.append("")
    lines.append(f"The collector took {got.posts:,} OTLP posts, {size:.1f} MB in all.")
    return lines


def report(
    results: Results, gateways: Sequence[Gateway], got: Received, concs: Sequence[int]
) -> str:
    blocks = [
        figures_table(results, concs),
        cost_table(results, concs),
        received_table(gateways, got),
    ]
    return "\n\n".join("\n".join(block) for block in blocks)


def access_lines(path: Path) -> int:
    with path.open("rb") as f:
        return sum(1 for line in f if ACCESS_LINE in line and CHAT_LINE in line)


def run_all(args: argparse.Namespace, upstream: Path) -> tuple[Results, list[Gateway], Received]:
    with contextlib.suppress(AttributeError, OSError):  # the load generator: core 0
        os.sched_setaffinity(0, {0})
    kit = [sys.executable, str(upstream), "--port", str(UPSTREAM_PORT), "--chunks", "20"]
    kit += ["--chunk-bytes", "16"]
    collector = [sys.executable, "-m", "bench.otlp_collector", str(COLLECTOR_PORT)]
    admin = secrets.token_hex(24)
    with tempfile.TemporaryDirectory(prefix="sluice-obs-") as tmp, contextlib.ExitStack() as stack:
        stack.enter_context(started(pinned(0, kit), UPSTREAM_PORT))
        stack.enter_context(started(pinned(0, collector), COLLECTOR_PORT))
        # spans leave at most 0.5 s after they end (the SDK's default: 5 s, or 512 queued)
        env = {**os.environ, "SLUICE_ADMIN_KEY": admin, "OTEL_BSP_SCHEDULE_DELAY": "500"}
        gateways = [Gateway(v, FIRST_PORT + i, Path(tmp) / v.name) for i, v in enumerate(VARIANTS)]
        with asyncio.Runner(loop_factory=uvloop.new_event_loop) as runner:
            with contextlib.ExitStack() as serving:
                for gw in gateways:
                    gw.home.mkdir()
                    gw.pid = serving.enter_context(
                        started(gateway_argv(gw), gw.port, env, stderr=gw.stderr)
                    )
                sitting = Sitting(gateways, admin, args)
                runner.run(sitting.run())
                served = runner.run(sitting.served())
            # the gateways have stopped: their logs are flushed and their spans exported
            stats = runner.run(final_stats())
        lines = {gw.variant.name: access_lines(gw.stderr) for gw in gateways}
        got = Received(served, lines, stats.spans, stats.posts, stats.bytes)
        return sitting.results, gateways, got


def main(argv: list[str] | None = None) -> int:
    args = sitting_args(__doc__, reps=5, concs=[1, 32, 64]).parse_args(argv)
    began = time.monotonic()
    results, gateways, got = run_all(args, kit_upstream(args.kit))
    print(report(results, gateways, got, args.concs))
    took = time.monotonic() - began
    print(f"\n{args.reps} reps of {args.duration:g} s per run, {took:.0f} s in all")
    return 0


if __name__ == "__main__":
    sys.exit(main())
