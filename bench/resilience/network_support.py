"""What the network rows share: a slow upstream that knows which request hung up,
reading a streamed answer's events, a request's log entry and an account's books."""

from __future__ import annotations

import asyncio
import json
import random
import re
from dataclasses import dataclass, field
from typing import Any

from sluice.storage.base import Store
from tests.support.fake_openai import chunk, text_stream
from tests.support.fake_upstream import Cut, Pause, Reply, Step
from tests.support.raw_http import RawResponse, exchange, get

ENV_KEY = "FAKE_UPSTREAM_KEY"
USD = 10**9
_LENGTH = re.compile(rb"(?i)content-length:\s*(\d+)")


@dataclass
class Seen:
    """One request as the slow upstream saw it (loop times)."""

    arrived: float
    hung_up: float | None = None
    closed: asyncio.Event = field(default_factory=asyncio.Event)


class SlowUpstream:
    """An OpenAI upstream that streams content events slowly (one every 5-10 ms, for
    far longer than any trial) and records, per request (named by its ``user``), when
    it arrived and when the gateway closed its side. A ``user`` ending in ``-mute``
    gets no answer at all (not even a head) until the gateway goes away."""

    def __init__(self, seed: int) -> None:
        self.seen: dict[str, Seen] = {}
        self.arrivals: dict[str, asyncio.Event] = {}
        self.port = 0
        self._rng = random.Random(seed)
        self._server: asyncio.Server | None = None

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def arrival(self, user: str) -> asyncio.Event:
        return self.arrivals.setdefault(user, asyncio.Event())

    async def start(self) -> None:
        self._server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        self.port = self._server.sockets[0].getsockname()[1]

    async def close(self) -> None:
        if self._server is not None:
            self._server.close()
            await self._server.wait_closed()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        loop = asyncio.get_running_loop()
        seen: Seen | None = None
        try:
            head = await reader.readuntil(b"\r\n\r\n")
            found = _LENGTH.search(head)
            body = await reader.readexactly(int(found.group(1))) if found else b"{}"
            user = str(json.loads(body).get("user", ""))
            seen = self.seen[user] = Seen(loop.time())
            self.arrival(user).set()
            sending = asyncio.ensure_future(self._stream(writer, mute=user.endswith("-mute")))
            hangup = asyncio.ensure_future(reader.read())  # b"" (or a reset): the peer left
            await asyncio.wait({sending, hangup}, return_when=asyncio.FIRST_COMPLETED)
            if hangup.done():
                seen.hung_up = loop.time()
            sending.cancel()
            await asyncio.gather(sending, hangup, return_exceptions=True)
        except (ConnectionError, asyncio.IncompleteReadError):
            if seen is not None and seen.hung_up is None:
                seen.hung_up = loop.time()
        finally:
            if seen is not None:
                seen.closed.set()
            writer.close()

    async def _stream(self, writer: asyncio.StreamWriter, *, mute: bool) -> None:
        if mute:
            await asyncio.sleep(3600)
        writer.write(
            b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n"
            b"transfer-encoding: chunked\r\n\r\n"
        )
        role = chunk(role="assistant", content="")
        writer.write(b"%x\r\n%s\r\n" % (len(role), role))
        for n in range(100_000):
            event = chunk(content=f"<{n}>")
            writer.write(b"%x\r\n%s\r\n" % (len(event), event))
            await writer.drain()
            await asyncio.sleep(self._rng.uniform(0.005, 0.010))


def events(body: bytes) -> list[Any]:
    """Every ``data:`` event of an SSE body, decoded (``[DONE]`` as the string)."""
    out: list[Any] = []
    for block in body.split(b"\n\n"):
        for line in block.split(b"\n"):
            if line.startswith(b"data: "):
                data = line[len(b"data: ") :]
                out.append("[DONE]" if data == b"[DONE]" else json.loads(data))
    return out


def content_of(found: list[Any]) -> str:
    """The concatenated content deltas of decoded events."""
    text = ""
    for event in found:
        if isinstance(event, dict):
            for choice in event.get("choices") or []:
                text += str((choice.get("delta") or {}).get("content") or "")
    return text


def errors_of(found: list[Any]) -> list[dict[str, Any]]:
    return [e["error"] for e in found if isinstance(e, dict) and "error" in e]


def connections_of(found: list[Any]) -> set[str]:
    return {str(e.get("connection")) for e in found if isinstance(e, dict) and "choices" in e}


async def request_record(host: str, port: int, key: str, request_id: str) -> dict[str, Any]:
    """The request's log entry, as ``GET /v1/requests/{id}`` returns it."""
    resp = await exchange(host, port, get(f"/v1/requests/{request_id}", key))
    if resp.status != 200:
        return {}
    doc: dict[str, Any] = resp.json()
    return doc


def nano(usd: object) -> int:
    """A request log's credits (USD) in nano-dollars."""
    return round(float(usd) * USD) if isinstance(usd, int | float) else 0


@dataclass
class Books:
    held: int
    open_holds: int
    balance: int
    mismatches: int

    @property
    def settled(self) -> bool:
        return self.held == 0 and self.open_holds == 0 and self.mismatches == 0

    def describe(self) -> str:
        return (
            f"held {self.held} nano in {self.open_holds} open holds; "
            f"reconcile: {self.mismatches} mismatches"
        )


async def books(store: Store, name: str, settle: float = 10.0) -> Books:
    """The account's books once its holds are released (up to ``settle`` seconds: the
    gateway writes settlements behind), and reconcile's verdict."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + settle
    while True:
        account = await store.get_account(name)
        assert account is not None
        if (account.held == 0 and account.open_holds == 0) or loop.time() > deadline:
            break
        await asyncio.sleep(0.1)
    mismatches = await store.reconcile()
    return Books(account.held, account.open_holds, account.balance, len(mismatches))


def stream_body(model: str, user: str, max_tokens: int = 200) -> bytes:
    return json.dumps(
        {
            "model": model,
            "stream": True,
            "max_tokens": max_tokens,
            "user": user,
            "messages": [{"role": "user", "content": "the network is bad today"}],
        }
    ).encode()


def response_events(resp: RawResponse) -> list[Any]:
    try:
        return events(resp.body)
    except ValueError:
        return [{"error": {"type": "unparsable", "code": None}}]


def pair_toml(a: str, b: str, *, a_timeouts: str, c_timeouts: str) -> str:
    """conn_a (primary of route ``bot``) and conn_c (the same upstream as conn_a with
    timeouts of its own, primary of route ``bot_c``), conn_b the standby of both; the
    models ``test/a``, ``test/b``, ``test/c``, priced."""
    conns = [("a", a, a_timeouts), ("c", a, c_timeouts), ("b", b, "")]
    out = ""
    for name, url, timeouts in conns:
        extra = f"timeouts = {{ {timeouts} }}\n" if timeouts else ""
        out += (
            f'[[connections]]\nid = "conn_{name}"\nprovider = "openai-compatible"\n'
            f'base_url = "{url}"\napi_key_env = "{ENV_KEY}"\n{extra}'
            f'[[models]]\nid = "test/{name}"\nproviders = {{ conn_{name} = "model-{name}" }}\n'
            "price = { input = 2.0, output = 8.0 }\n"
        )
    for route, first in (("bot", "test/a"), ("bot_c", "test/c")):
        out += f'[[routes]]\nname = "{route}"\n'
        out += f'chain = [ {{ model = "{first}" }}, {{ model = "test/b" }} ]\n'
    return out


def ending(resp: RawResponse, record: dict[str, Any]) -> str:
    """How a response ended, in words: ``'x' from conn_a, [DONE]`` (with the failed
    attempts before it), ``HTTP 504 type/code``, ``'x', then error type/code``."""
    if resp.status != 200:
        try:
            error = resp.json().get("error", {})
        except ValueError:
            error = {}
        return f"HTTP {resp.status} {error.get('type')}/{error.get('code')}"
    found = response_events(resp)
    text = content_of(found)
    if found[-1:] == ["[DONE]"]:
        served = ",".join(sorted(connections_of(found)))
        failed = [a.get("code") for a in record.get("attempts", [])[:-1]]
        after = f" after {','.join(map(str, failed))}" if failed else ""
        return f"{text!r} from {served}, [DONE]{after}"
    errors = errors_of(found)
    last = errors[-1] if errors else {}
    return f"{text!r}, then {len(errors)} error {last.get('type')}/{last.get('code')}"


# -- the failure modes of the failover row, the cases of the stalls row ---------------------

ROLE = chunk(role="assistant", content="")
PRIMARY = "connect = 1, first_event = 0.3, stall = 1, total = 5"
DEADLINE_FIRST = "connect = 1, first_event = 1, stall = 1, total = 0.3"
FAILURES: dict[str, tuple[str, Reply, str]] = {
    # mode: (route, the primary's reply, its attempt's expected "outcome/code" prefix)
    "reset, no byte": ("bot", Reply.reset(), "upstream_error/"),
    "HTTP 500": ("bot", Reply.json({"error": {"message": "boom"}}, status=500), "upstream_error/"),
    "HTTP 503": (
        "bot",
        Reply.json({"error": {"message": "busy"}}, status=503),
        "service_unavailable/",
    ),
    "HTTP 429, Retry-After 0": (
        "bot",
        Reply.json({"error": {"message": "slow down"}}, status=429, **{"retry-after": "0"}),
        "rate_limit_error/",
    ),
    "HTTP 408": (
        "bot",
        Reply.json({"error": {"message": "slow"}}, status=408),
        "request_timeout/",
    ),
    "head, then silence past first_event": (
        "bot",
        Reply.stream(Pause(30)),
        "request_timeout/first_event_timeout",
    ),
    "role chunk, then reset": ("bot", Reply.stream(ROLE, Cut()), "upstream_error/"),
    "malformed JSON event": ("bot", Reply.stream(b"data: {not json}\n\n"), "upstream_error/"),
    "error event first": (
        "bot",
        Reply.stream(b'data: {"error": {"message": "overloaded"}}\n\n'),
        "upstream_error/",
    ),
    "total deadline before the first event": (
        "bot_c",  # conn_c: the same upstream, total (0.3 s) shorter than first_event (1 s)
        Reply.stream(ROLE, Pause(30)),
        "request_timeout/deadline_exceeded",
    ),
}


FIRST_EVENT, STALL, TOTAL, MARGIN = 0.4, 0.6, 1.6, 0.3
STALLS = f"connect = 1, first_event = {FIRST_EVENT}, stall = {STALL}, total = {TOTAL}"
TRICKLE: list[Step] = [s for _ in range(40) for s in (b":", Pause(0.25), b"\n", Pause(0.25))]
CASES: list[tuple[str, str, Reply, str, float, float]] = [
    # case, model, conn_a's reply, expected ending (see ending()), earliest and latest end (s)
    ("no stall", "test/a", Reply.stream(*text_stream("x")), "'x' from conn_a, [DONE]", 0, 0.3),
    (
        "head, then silence (a standby)",
        "bot",
        Reply.stream(Pause(30)),
        "'from b' from conn_b, [DONE] after first_event_timeout",
        FIRST_EVENT,
        FIRST_EVENT + MARGIN,
    ),
    (
        "head, then silence (no standby)",
        "test/a",
        Reply.stream(Pause(30)),
        "HTTP 504 request_timeout/first_event_timeout",
        FIRST_EVENT,
        FIRST_EVENT + MARGIN,
    ),
    (
        "trickle: content, then a byte every 250 ms",
        "test/a",
        Reply.stream(ROLE, chunk(content="x"), *TRICKLE),
        "'x', then 1 error request_timeout/deadline_exceeded",
        TOTAL,
        TOTAL + MARGIN,
    ),
    (
        "silence after content",
        "test/a",
        Reply.stream(ROLE, chunk(content="x"), Pause(30)),
        "'x', then 1 error request_timeout/stream_stalled",
        STALL,
        STALL + MARGIN,
    ),
]
