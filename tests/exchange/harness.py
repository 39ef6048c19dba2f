"""One gateway's request core for exchange tests, without sockets: the real Services
(router over the fake transport, tenants, meter and limiter, guardrails, metrics,
tasks) over a real SQLite store, a client stream that records what is written, and a
write-behind log that keeps the rows and settlements it is handed."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

from sluice.config import GuardrailConfig, LimitsConfig, ModelConfig, PriceConfig
from sluice.core.connection import ConnectionSettings
from sluice.core.principal import Principal
from sluice.exchange.exchange import Exchange
from sluice.exchange.metrics import Metrics
from sluice.exchange.ports import ClientGoneError, Headers
from sluice.exchange.refusals import RepeatLog, Tarpit
from sluice.exchange.services import Services
from sluice.exchange.tasks import Tasks
from sluice.exchange.tenants import Tenants
from sluice.exchange.work import chat_work
from sluice.frontdoors.chat import ChatCompletionsDoor
from sluice.guardrails.selection import Guardrails
from sluice.limits.stores.memory import MemoryLimiter
from sluice.metering.meter import Meter
from sluice.routing.catalog import Catalog
from sluice.storage.base import RequestRecord, Settlement, Store
from sluice.storage.factory import open_store
from sluice.storage.writer import WriteBehind
from tests.support.fake_transport import Answer, FakeClock, FakeTransport
from tests.support.routing import make_router

FIXED_TIME = 1787481600
PRINCIPAL = Principal(
    account_id="acct_1",
    account_name="team",
    key_id="key_1",
    key_prefix="sk-sl-test",
    metered=True,
    is_dev=False,
)
MODEL_CONFIG = ModelConfig(
    id="test/m",
    providers={"a": "native-a", "b": "native-b"},
    price=PriceConfig(input=2.0, output=8.0),
)


class RecordingLog(WriteBehind):
    """The write-behind queue, kept in memory: what the exchange queued, nothing written."""

    def __init__(self, store: Store) -> None:
        super().__init__(store, lambda: FIXED_TIME)
        self.records: list[RequestRecord] = []
        self.settlements: list[Settlement] = []
        self.logged = asyncio.Event()

    def log(self, record: RequestRecord) -> None:
        self.records.append(record)
        self.logged.set()

    def settle(self, settlement: Settlement) -> None:
        self.settlements.append(settlement)


class RecordingClient:
    """A :class:`~sluice.exchange.ports.ClientStream` that keeps what is written;
    ``gone_at``: the ``write`` that finds the client gone (and every one after)."""

    def __init__(self, gone_at: int | None = None) -> None:
        self.started = False
        self.finished = False
        self.keep_alive = True
        self.status: int | None = None
        self.headers: Headers = []
        self.body = b""
        self.closed = False
        self.ended_now = False
        self.writes = 0
        self._gone_at = gone_at
        self._interrupted = False

    @property
    def interrupted(self) -> bool:
        return self._interrupted

    def interrupt(self) -> None:
        """The gateway is stopping (the server then cancels the request's task)."""
        self._interrupted = True

    async def send(self, status: int, headers: Headers, body: bytes) -> None:
        self.send_now(status, headers, body)

    def send_now(self, status: int, headers: Headers, body: bytes) -> None:
        self.started = self.finished = True
        self.status, self.headers, self.body = status, headers, body

    def start(self, status: int, headers: Headers) -> None:
        if not self.started:
            self.started = True
            self.status, self.headers = status, headers

    def write_now(self, data: bytes) -> None:
        self.body += data

    async def write(self, data: bytes) -> None:
        self.writes += 1
        if self._gone_at is not None and self.writes >= self._gone_at:
            raise ClientGoneError()
        self.body += data

    def end_now(self, data: bytes) -> None:
        self.finished, self.keep_alive, self.ended_now = True, False, True
        self.body += data

    async def end(self, data: bytes = b"", close: bool = False) -> None:
        self.finished = True
        if close:
            self.closed, self.keep_alive = True, False
        self.body += data


class Harness:
    def __init__(self, services: Services, transport: FakeTransport, log: RecordingLog) -> None:
        self.services = services
        self.transport = transport
        self.log = log
        self.exchange: Exchange | None = None

    async def run(self, body: dict[str, Any], client: RecordingClient) -> tuple[Exchange, int]:
        """One request; :attr:`exchange` is set before it runs (for runs that raise)."""
        door = ChatCompletionsDoor()
        req = door.decode(json.dumps(body).encode(), {}, self.services.max_json_depth)
        exchange = self.exchange = Exchange(
            self.services, door, client, [("x-request-id", "req_1")]
        )
        status = await exchange.run(
            req,
            PRINCIPAL,
            work=chat_work(req),
            request_id="req_1",
            created=FIXED_TIME,
            started=self.services.clock(),
        )
        return exchange, status

    @property
    def record(self) -> RequestRecord:
        (record,) = self.log.records
        return record

    @property
    def charged(self) -> list[int]:
        return [s.charge for s in self.log.settlements]


@asynccontextmanager
async def harness(
    tmp_path: Path,
    answers: dict[str, list[Answer]],
    connections: Sequence[ConnectionSettings],
    *,
    limits: LimitsConfig | None = None,
    guardrails: Sequence[GuardrailConfig] = (),
) -> AsyncIterator[Harness]:
    """``answers`` by connection id; the account holds 1 USD of credits."""
    store = await open_store(f"sqlite:///{tmp_path / 'exchange.db'}")
    try:
        await store.create_account(
            PRINCIPAL.account_id, PRINCIPAL.account_name, metered=True, credits=10**9, now=0
        )
        clock = FakeClock(100.0)
        transport = FakeTransport(answers, clock=clock, send_seconds=0.25)
        router = make_router(transport, clock)
        log = RecordingLog(store)
        services = Services(
            router=router,
            tenants=Tenants(
                store=store,
                vault=None,
                catalog=Catalog([MODEL_CONFIG]),
                connections=connections,
                routes=[],
                clock=clock,
            ),
            meter=Meter(
                store, log, new_id=lambda p: f"{p}_1", wall_clock=lambda: FIXED_TIME, hold_ttl=3600
            ),
            log=log,
            limiter=MemoryLimiter(clock),
            limits=limits or LimitsConfig(),
            guardrails=Guardrails(guardrails, transport),
            metrics=Metrics(router.breaker, clock, frozenset(c.id for c in connections)),
            tasks=Tasks(clock, hold_ttl=3600),
            repeats=RepeatLog(log, clock),
            tarpit=Tarpit(clock),
            clock=clock,
            keepalive_interval=0.0,
            max_json_depth=64,
        )
        try:
            yield Harness(services, transport, log)
        finally:
            await services.tasks.close()
    finally:
        await store.close()


def events(body: bytes) -> list[str]:
    """A streamed body, event by event: ``role``, ``content:<text>``, ``finish:<reason>``,
    ``usage:<prompt>/<completion>``, ``error:<code>``, ``[DONE]``."""
    out = []
    for part in body.split(b"\n\n"):
        if not part:
            continue
        assert part.startswith(b"data: "), part
        data = part.removeprefix(b"data: ")
        if data == b"[DONE]":
            out.append("[DONE]")
            continue
        doc = json.loads(data)
        if "error" in doc:
            out.append(f"error:{doc['error']['code']}")
        elif not doc["choices"]:
            out.append(f"usage:{doc['usage']['prompt_tokens']}/{doc['usage']['completion_tokens']}")
        else:
            choice = doc["choices"][0]
            if choice["finish_reason"] is not None:
                out.append(f"finish:{choice['finish_reason']}")
            elif "role" in choice["delta"]:
                out.append("role")
            else:
                out.append(f"content:{choice['delta']['content']}")
    return out


def docs(body: bytes) -> list[Any]:
    """The JSON of every ``data:`` event but ``[DONE]``."""
    parts = [p.removeprefix(b"data: ") for p in body.split(b"\n\n") if p]
    return [json.loads(p) for p in parts if p != b"[DONE]"]
