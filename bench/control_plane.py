"""The control plane at 100,000 request-log rows: list and spend APIs, p50-p99 (issue 12).

    .venv/bin/python -m bench.control_plane --backend both [--rows 100000] [--samples 200]

Per backend: a fresh store (SQLite in a temporary directory; PostgreSQL a new database on
127.0.0.1:5432, dropped afterwards) opened and migrated by the project's factory, so the
indexes are the real ones. It seeds the request log through ``Store.write_requests`` and
the ledger through ``place_hold`` and ``settle`` (one charge per metered request), starts
``sluice serve`` on it, and times sequential requests over one keep-alive connection.
Prints a Markdown table per backend; the target is p99 < 100 ms for a page of 100.
"""

from __future__ import annotations

import argparse
import asyncio
import math
import os
import secrets
import signal
import sys
import tempfile
import time
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import NamedTuple
from urllib.parse import parse_qsl

import aiohttp
import asyncpg
import msgspec

from bench.control_plane_seed import DAY, HAS_SPEND_FIELDS, SPAN_DAYS, Fleet, seed
from sluice.storage.factory import open_store

PG_ADMIN_DSN = os.environ.get("SLUICE_BENCH_PG", "postgresql://postgres@127.0.0.1:5432/postgres")
ADMIN_ENV = "SLUICE_BENCH_ADMIN_KEY"
TARGET_MS = 100.0
WARMUP = 3
PER_QUERY_SECONDS = 8.0


class Query(NamedTuple):
    label: str
    path: str
    query: str
    admin: bool
    page: int = 1
    """Time this page, reached by following ``next_cursor`` from the first."""


class Timing(NamedTuple):
    label: str
    ms: list[float]
    rows: int


@asynccontextmanager
async def database(backend: str, work: Path) -> AsyncIterator[str]:
    """A fresh, empty database's URL: a SQLite file, or a new PostgreSQL database."""
    if backend == "sqlite":
        yield f"sqlite:///{work / 'sluice.db'}"
        return
    name = f"sluice_bench_{uuid.uuid4().hex[:12]}"
    admin = await asyncpg.connect(PG_ADMIN_DSN, timeout=5)
    try:
        await admin.execute(f'CREATE DATABASE "{name}"')
        yield PG_ADMIN_DSN.rsplit("/", 1)[0] + "/" + name
    finally:
        await admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        await admin.close()


@asynccontextmanager
async def gateway(url: str, work: Path, admin_key: str) -> AsyncIterator[str]:
    """``sluice serve`` over ``url`` on a free 127.0.0.1 port; its base URL."""
    config = work / "sluice.toml"
    config.write_text(
        "[server]\ndev_key = false\ndemo = false\nenv_connections = false\n"
        f'admin_key_env = "{ADMIN_ENV}"\n[storage]\nurl = "{url}"\n'
    )
    proc = await asyncio.create_subprocess_exec(
        *(sys.executable, "-m", "sluice", "serve", "--config", str(config)),
        *("--host", "127.0.0.1", "--port", "0", "--log-level", "WARNING"),
        stdout=asyncio.subprocess.DEVNULL,
        stderr=asyncio.subprocess.PIPE,
        env={**os.environ, "SLUICE_HOME": str(work), ADMIN_ENV: admin_key},
    )
    assert proc.stderr is not None
    banner, drain = b"", None
    try:
        while b"Press Ctrl-C" not in banner:
            line = await asyncio.wait_for(proc.stderr.readline(), 30)
            if not line:
                raise RuntimeError(f"the gateway did not start:\n{banner.decode()}")
            banner += line
        drain = asyncio.ensure_future(proc.stderr.read())  # keep its stderr flowing
        yield banner.split(b"listening on ", 1)[1].split()[0].decode()
    finally:
        if proc.returncode is None:
            proc.send_signal(signal.SIGTERM)
            await asyncio.wait_for(proc.wait(), 15)
        if drain is not None:
            drain.cancel()


def queries(fleet: Fleet) -> list[Query]:
    """Each listing and report timed, with the filters a person would use; every page
    asks for 100 rows (or groups)."""
    beta = fleet.accounts["beta"][0]
    busy = next(k for k in fleet.keys if k.account_id == beta).id
    quiet = [k for k in fleet.keys if k.account_id == fleet.accounts["acme"][0]][-1].id
    mid = fleet.start + SPAN_DAYS * DAY // 2
    day, month = f"since={mid}&until={mid + DAY}", f"since={mid - 15 * DAY}&until={mid + 15 * DAY}"
    adm, own, spend, own_spend = "/admin/requests", "/v1/requests", "/admin/spend", "/v1/spend"
    # fmt: off
    return [
        Query("admin requests: first page", adm, "", True),
        Query("admin requests: page 50", adm, "", True, 50),
        Query("admin requests: account=acme (big)", adm, "account=acme", True),
        Query("admin requests: account=beta (small)", adm, "account=beta", True),
        Query("admin requests: account=beta, page 20", adm, "account=beta", True, 20),
        Query("admin requests: status=error", adm, "status=error", True),
        Query("admin requests: model=bedrock/nova-pro", adm, "model=bedrock/nova-pro", True),
        Query("admin requests: provider=anthropic", adm, "provider=anthropic", True),
        Query("admin requests: status=blocked (rare)", adm, "status=blocked", True),
        Query("admin requests: model=gemini/gemini-2.5-pro (none)", adm,
              "model=gemini/gemini-2.5-pro", True),
        Query("admin requests: key=(busy beta key)", adm, f"key={busy}", True),
        Query("admin requests: key=(quiet acme key)", adm, f"key={quiet}", True),
        Query("admin requests: since/until (1 day)", adm, day, True),
        Query("admin requests: account=beta&status=error", adm, "account=beta&status=error", True),
        Query("admin requests: format=csv", adm, "format=csv", True),
        Query("admin requests: format=jsonl, page 50", adm, "format=jsonl", True, 50),
        Query("v1 requests: first page", own, "", False),
        Query("v1 requests: page 50", own, "", False, 50),
        Query("v1 requests: status=error", own, "status=error", False),
        Query("v1 requests: model=bedrock/nova-pro", own, "model=bedrock/nova-pro", False),
        Query("v1 requests: key=(quiet key)", own, f"key={quiet}", False),
        Query("v1 requests: since/until (1 day)", own, day, False),
        Query("v1 requests: format=csv", own, "format=csv", False),
        Query("admin spend: by=key", spend, "by=key", True),
        Query("admin spend: by=model", spend, "by=model", True),
        Query("admin spend: by=provider, format=csv", spend, "by=provider&format=csv", True),
        Query("admin spend: by=day", spend, "by=day", True),
        Query("admin spend: by=day, account=acme, 30 days", spend, f"by=day&account=acme&{month}",
              True),
        Query("admin spend: by=day, limit=10, page 3", spend, "by=day&limit=10", True, 3),
        Query("admin spend: by=key, model=openai/gpt-4o, format=jsonl", spend,
              "by=key&model=openai/gpt-4o&format=jsonl", True),
        Query("v1 spend: by=model", own_spend, "by=model", False),
        Query("v1 spend: by=day, 1 day", own_spend, f"by=day&{day}", False),
        Query("v1 spend: by=key, format=csv", own_spend, "by=key&format=csv", False),
    ]
    # fmt: on


Auth = dict[bool, str]  # admin key or not -> the Authorization header


class Client(NamedTuple):
    session: aiohttp.ClientSession
    base: str
    auth: Auth


async def get(client: Client, query: Query, params: dict[str, str]) -> tuple[int, bytes, str]:
    """One request: its status, body and ``x-next-cursor`` (exports)."""
    url = client.base + query.path
    headers = {"Authorization": client.auth[query.admin]}
    async with client.session.get(url, params=params, headers=headers) as r:
        return r.status, await r.read(), r.headers.get("x-next-cursor", "")


def rows_in(body: bytes, params: dict[str, str]) -> tuple[int, str]:
    """How many rows (or groups) a page holds, and its next cursor ("" for none)."""
    fmt = params.get("format", "json")
    if fmt == "json":
        doc = msgspec.json.decode(body)
        return len(doc["data"]), doc.get("next_cursor") or ""
    return body.count(b"\n") - (fmt == "csv"), ""


async def params_for(client: Client, query: Query) -> dict[str, str] | None:
    """The query's parameters, with the cursor of its page; None when the API is absent."""
    params = {"limit": "100", **dict(parse_qsl(query.query))}
    for _ in range(query.page - 1):
        status, body, cursor = await get(client, query, params)
        if status == 404:
            return None
        cursor = cursor or rows_in(body, params)[1]
        if not cursor:  # fewer pages than that: time the last one
            break
        params["cursor"] = cursor
    return params


async def measure(client: Client, query: Query, samples: int) -> Timing | None:
    """``samples`` timed requests after a few warm-ups (fewer past ~8 s); None when
    the API answers 404 (a spend report before it exists)."""
    params = await params_for(client, query)
    ms: list[float] = []
    deadline = time.perf_counter() + PER_QUERY_SECONDS
    while params is not None and len(ms) < samples + WARMUP:
        started = time.perf_counter()
        status, body, _ = await get(client, query, params)
        ms.append((time.perf_counter() - started) * 1000)
        if status == 404 and query.path.endswith("/spend"):
            return None
        if status != 200:
            raise RuntimeError(f"{query.label}: HTTP {status}: {body[:300]!r}")
        if time.perf_counter() > deadline and len(ms) >= 20 + WARMUP:
            break
    return None if params is None else Timing(query.label, ms[WARMUP:], rows_in(body, params)[0])


async def run_queries(base: str, auth: Auth, qs: list[Query], samples: int) -> list[Timing | str]:
    """Every query in turn, one client and one keep-alive connection."""
    out: list[Timing | str] = []
    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=1)) as session:
        client = Client(session, base, auth)
        for query in qs:
            timing = await measure(client, query, samples)
            out.append(query.label if timing is None else timing)
    return out


def percentile(ms: list[float], p: float) -> float:
    """Nearest rank of sorted ``ms``."""
    return ms[min(len(ms) - 1, max(0, math.ceil(p / 100 * len(ms)) - 1))]


def table(timings: list[Timing | str]) -> str:
    lines = ["| query | n | rows | p50 | p95 | p99 | max | p99 < 100 ms |"]
    lines.append("|---|---:|---:|---:|---:|---:|---:|:-:|")
    for t in (t for t in timings if isinstance(t, Timing)):
        ms = sorted(t.ms)
        cells = " | ".join(f"{percentile(ms, p):.1f}" for p in (50, 95, 99, 100))
        ok = "yes" if percentile(ms, 99) < TARGET_MS else "**no**"
        lines.append(f"| {t.label} | {len(ms)} | {t.rows} | {cells} | {ok} |")
    if absent := [t for t in timings if isinstance(t, str)]:
        lines.append(f"\nNot available (404, no spend API in this build): {'; '.join(absent)}.")
    return "\n".join(lines)


async def seeded(url: str, rows: int) -> tuple[Fleet, str]:
    """Open, migrate and seed the store; the fleet and a line on how long it took. On
    PostgreSQL then ``ANALYZE``, as autovacuum does within a minute of a bulk load."""
    store = await open_store(url)
    try:
        started = time.perf_counter()
        fleet, log_s, ledger_s = await seed(store, rows)
    finally:
        await store.close()
    took = time.perf_counter() - started
    if url.startswith("postgresql:"):
        conn = await asyncpg.connect(url)
        await conn.execute("ANALYZE")
        await conn.close()
    return fleet, f"seeded in {took:.1f} s (request log {log_s:.1f} s, ledger {ledger_s:.1f} s)"


async def bench_backend(backend: str, rows: int, samples: int) -> str:
    """Seed, serve, time: the backend's Markdown section."""
    with tempfile.TemporaryDirectory(prefix="sluice-cp-") as tmp:
        work = Path(tmp)
        async with database(backend, work) as url:
            print(f"{backend}: seeding {rows:,} rows", file=sys.stderr)
            fleet, seeding = await seeded(url, rows)
            acme, admin_key = fleet.accounts["acme"][0], secrets.token_urlsafe(32)
            user_key = next(k.secret for k in fleet.keys if k.account_id == acme)
            auth = {True: f"Bearer {admin_key}", False: f"Bearer {user_key}"}
            async with gateway(url, work, admin_key) as base:
                print(f"{backend}: {seeding}; timing at {base}", file=sys.stderr)
                timings = await run_queries(base, auth, queries(fleet), samples)
    return f"### {backend}: {rows:,} request-log rows, {seeding}\n\n{table(timings)}"


async def main_async(args: argparse.Namespace) -> None:
    backends = ["sqlite", "postgres"] if args.backend == "both" else [args.backend]
    started = time.perf_counter()
    sections = [await bench_backend(b, args.rows, args.samples) for b in backends]
    fields = "with" if HAS_SPEND_FIELDS else "without"
    print(f"ms per request over HTTP on 127.0.0.1, one keep-alive client; settlements {fields}")
    print(f"model/provider; whole run {time.perf_counter() - started:.0f} s.\n")
    print("\n\n".join(sections))


def main() -> None:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--backend", choices=("sqlite", "postgres", "both"), default="both")
    ap.add_argument("--rows", type=int, default=100_000, help="request-log rows to seed")
    ap.add_argument("--samples", type=int, default=200, help="timed requests per query")
    asyncio.run(main_async(ap.parse_args()))


if __name__ == "__main__":
    main()
