"""What the lifecycle rows share: metered stream requests, reading streams, the store."""

from __future__ import annotations

import asyncio
import json
import os
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench.resilience.harness import Gateway
from sluice.core.tokens import prompt_token_ceiling
from sluice.core.usage import Price, TokenUsage
from sluice.frontdoors.chat import decode_chat_request
from sluice.metering.charges import nano_from_pico
from sluice.metering.pricing import cost_pico
from sluice.storage.factory import open_store
from sluice.storage.sqlite import SqliteStore
from tests.support.fake_openai import chunk
from tests.support.fake_upstream import Pause, Step
from tests.support.gateway import UPSTREAM_KEY
from tests.support.raw_http import RawClient, post

ENV = {"FAKE_UPSTREAM_KEY": UPSTREAM_KEY}
PRICE = Price.per_million(2.0, 8.0, cache_read=0.5)  # test/gpt-fake's price
MAX_TOKENS = 200
SHUTTING_DOWN = {
    "message": "The gateway is shutting down.",
    "type": "server_error",
    "code": "server_shutting_down",
}


def stream_body(*, usage: bool, text: str = "keep talking") -> bytes:
    doc: dict[str, Any] = {
        "model": "test/gpt-fake",
        "stream": True,
        "max_tokens": MAX_TOKENS,
        "messages": [{"role": "user", "content": text}],
    }
    if usage:
        doc["stream_options"] = {"include_usage": True}
    return json.dumps(doc).encode()


def hold_for(body: bytes) -> int:
    """The credit hold the gateway places for ``body`` (its prompt ceiling, max_tokens)."""
    ceiling = prompt_token_ceiling(decode_chat_request(body))
    usage = TokenUsage(prompt_tokens=ceiling, completion_tokens=MAX_TOKENS)
    return nano_from_pico(cost_pico(usage, PRICE))


def slow_stream(seconds: float, every: float) -> list[Step]:
    """An upstream stream that writes a word every ``every`` seconds for ``seconds``."""
    steps: list[Step] = [chunk(role="assistant", content=""), chunk(content="word ")]
    for _ in range(int(seconds / every)):
        steps += [Pause(every), chunk(content="word ")]
    return steps


def sse_data(body: bytes) -> list[bytes]:
    """The ``data:`` payloads of an SSE body, in order."""
    out = []
    for event in body.split(b"\n\n"):
        for line in event.split(b"\n"):
            if line.startswith(b"data:"):
                out.append(line[5:].strip())
    return out


@dataclass
class Live:
    """A stream whose head and first chunk have arrived."""

    client: RawClient
    request_id: str
    first: bytes


async def open_stream(gw: Gateway, body: bytes, key: str) -> Live:
    client = await RawClient.connect(gw.host, gw.port)
    await client.send(post("/v1/chat/completions", body, key))
    status, headers = await client.read_head()
    if status != 200:
        raise RuntimeError(f"a stream was refused with {status}")
    first = await client.read_chunk()
    return Live(client, headers.get("x-request-id", ""), first or b"")


async def read_rest(live: Live) -> tuple[bytes, bool]:
    """The rest of a chunked body; whether its terminator arrived."""
    body = live.first
    try:
        while (piece := await live.client.read_chunk()) is not None:
            body += piece
    except (asyncio.IncompleteReadError, ConnectionError):
        return body, False
    return body, True


async def sqlite_store(home: Path) -> SqliteStore:
    store = await open_store(f"sqlite:///{home / 'sluice.db'}")
    assert isinstance(store, SqliteStore)
    return store


def storage_toml(home: Path) -> str:
    return f'[storage]\nurl = "sqlite:///{home / "sluice.db"}"\n'


def process_gone(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, IndexError):
        return True
    return state in {"Z", "X"}


async def reconcile_cli(home: Path) -> tuple[int, str]:
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        *("-m", "sluice", "ledger", "reconcile", "--config", str(home / "sluice.toml")),
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT,
        env={**os.environ, **ENV, "SLUICE_HOME": str(home)},
    )
    out, _ = await asyncio.wait_for(proc.communicate(), 60)
    return proc.returncode or 0, out.decode(errors="replace").strip()


async def ledger_charges(store: SqliteStore, account_id: str) -> dict[str, int]:
    """Each charged request of the account: what the ledger charged it."""
    rows = await store.all(
        "SELECT request_id, amount FROM ledger WHERE kind = 'charge' AND account_id = ?",
        (account_id,),
    )
    return {str(r[0]): -int(r[1]) for r in rows}


async def wait_settled(store: SqliteStore, request_ids: list[str], wait: float = 10) -> None:
    """Until each of ``request_ids`` has its charge in the ledger (at most ``wait`` s)."""
    marks = ",".join("?" * len(request_ids))
    loop = asyncio.get_running_loop()
    deadline = loop.time() + wait
    while loop.time() < deadline:
        rows = await store.all(f"SELECT 1 FROM ledger WHERE request_id IN ({marks})", request_ids)
        if len(rows) >= len(request_ids):
            return
        await asyncio.sleep(0.02)
