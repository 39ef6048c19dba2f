"""The control-plane bench's data: accounts, keys and ``rows`` requests over 60 days,
written through the ``Store`` API only (the request log by ``write_requests``, the
ledger by ``place_hold`` and ``settle``), so migrations and indexes are the real ones."""

from __future__ import annotations

import asyncio
import os
import random
import time
from typing import Any, NamedTuple

from sluice.accounts.keys import key_digest, key_prefix, new_key
from sluice.ids import ordered_id
from sluice.storage.base import HoldRequest, RequestRecord, Settlement, Store

DAY = 86400
SPAN_DAYS = 60
BATCH = 1000
MODELS = (  # (model, provider, USD per 1M input tokens, per 1M output tokens, weight)
    ("openai/gpt-4o", "openai", 2.5, 10.0, 30),
    ("openai/gpt-4o-mini", "openai", 0.15, 0.6, 25),
    ("anthropic/claude-sonnet-4", "anthropic", 3.0, 15.0, 20),
    ("anthropic/claude-haiku-3.5", "anthropic", 0.8, 4.0, 15),
    ("bedrock/llama-3.1-70b", "bedrock", 0.72, 0.72, 7),
    ("bedrock/nova-pro", "bedrock", 0.8, 3.2, 3),
)
ACCOUNTS = (  # (name, share of the requests, keys, metered): one big, four small
    *(("acme", 60, 8, True), ("beta", 10, 3, True), ("gamma", 10, 3, True)),
    *(("delta", 10, 3, True), ("omega", 10, 3, False)),
)
STATUSES = (("complete", 93), ("truncated", 2), ("error", 3), ("cancelled", 2), ("blocked", 0.05))
HAS_SPEND_FIELDS = "model" in Settlement.__struct_fields__


class Key(NamedTuple):
    """A seeded API key; ``weight``: its share of all requests."""

    id: str
    account_id: str
    secret: str
    weight: float


class Fleet(NamedTuple):
    """What was seeded: account name -> (id, metered), every key, the time span."""

    accounts: dict[str, tuple[str, bool]]
    keys: list[Key]
    start: int


async def make_fleet(store: Store, start: int) -> Fleet:
    """The accounts and keys; an account's keys get 1, 1/8, 1/27, ... of its requests
    (one busy production key, a few quiet ones)."""
    accounts: dict[str, tuple[str, bool]] = {}
    keys: list[Key] = []
    for name, weight, n_keys, metered in ACCOUNTS:
        account_id = ordered_id("acct")
        await store.create_account(account_id, name, metered=metered, credits=10**18, now=start)
        accounts[name] = (account_id, metered)
        shares = [1 / (i + 1) ** 3 for i in range(n_keys)]
        for i, share in enumerate(shares):
            secret, key_id = new_key(os.urandom(32)), ordered_id("key")
            digest, prefix = key_digest(secret), key_prefix(secret)
            await store.add_key(key_id, account_id=account_id, key_digest=digest,
                                prefix=prefix, name=f"{name}-{i}", now=start)  # fmt: skip
            keys.append(Key(key_id, account_id, secret, weight * share / sum(shares)))
    return Fleet(accounts, keys, start)


def make_record(rng: random.Random, key: Key, created_at: int) -> tuple[RequestRecord, int]:
    """One request-log row, shaped like the gateway's, and its charge in nano-USD."""
    model, provider, price_in, price_out, _ = rng.choices(MODELS, [m[4] for m in MODELS])[0]
    status = rng.choices([s for s, _ in STATUSES], [w for _, w in STATUSES])[0]
    failed = status in ("error", "blocked")  # blocked: refused by a guardrail, ~50 rows
    prompt, completion = rng.randint(50, 4000), 0 if failed else rng.randint(10, 1000)
    charge = 0 if failed else int(prompt * price_in * 1000 + completion * price_out * 1000)
    attempt = {"position": "1", "model": model, "connection": f"conn_{provider}"}
    attempt |= {"provider": provider, "outcome": "upstream_error" if failed else "served"}
    # fmt: off
    record = RequestRecord(
        id=ordered_id("req"), account_id=key.account_id, key_id=key.id, created_at=created_at,
        requested_model=model, served_model=model, route=model, provider=provider,
        connection=f"conn_{provider}", attempts=[attempt | {"latency_ms": 180.0}],
        status=status, stream=rng.random() < 0.7,
        finish_reason=None if failed else ("length" if status == "truncated" else "stop"),
        prompt_tokens=prompt, completion_tokens=completion, cost=charge / 1e9,
        price_source="config", duration_ms=rng.uniform(200, 9000),
        ttft_ms=None if failed else rng.uniform(80, 900), http_status=502 if failed else 200,
        error_type="upstream_error" if failed else None,
        error_code=("guardrail_blocked" if status == "blocked" else "upstream_http_error")
        if failed else None, error_message="The request failed." if failed else None,
    )
    # fmt: on
    return record, charge


async def charge_batch(store: Store, batch: list[tuple[RequestRecord, int]]) -> None:
    """A hold per request (placed concurrently, as requests in flight place them), then
    one settlement of the whole batch, dated when the request was made."""
    holds = [
        HoldRequest(ordered_id("hold"), r.account_id, r.key_id, r.id, charge + 10**6,
                    r.created_at, r.created_at + 3600)
        for r, charge in batch
    ]  # fmt: skip
    placed = await asyncio.gather(*(store.place_hold(h) for h in holds))
    assert all(placed), "a hold was refused: the accounts' credits should cover everything"
    settlements = []
    for h, (record, charge) in zip(holds, batch, strict=True):
        served = {"model": record.served_model, "provider": record.provider}  # for spend reports
        extra: dict[str, Any] = served if HAS_SPEND_FIELDS else {}
        args = (h.hold_id, h.account_id, h.key_id, h.request_id, charge, record.created_at)
        settlements.append(Settlement(*args, **extra))
    await store.settle(settlements)


async def seed(store: Store, rows: int) -> tuple[Fleet, float, float]:
    """Accounts, keys, ``rows`` requests oldest first over 60 days; the seconds spent on
    the request log and on the ledger."""
    rng = random.Random(12)
    fleet = await make_fleet(store, int(time.time()) - SPAN_DAYS * DAY)
    metered = {account_id for account_id, is_metered in fleet.accounts.values() if is_metered}
    weights = [k.weight for k in fleet.keys]
    log_s = ledger_s = 0.0
    for first in range(0, rows, BATCH):
        batch = []
        for i in range(first, min(rows, first + BATCH)):
            key = rng.choices(fleet.keys, weights)[0]
            batch.append(make_record(rng, key, fleet.start + i * SPAN_DAYS * DAY // rows))
        started = time.perf_counter()
        await store.write_requests([r for r, _ in batch])
        logged = time.perf_counter()
        await charge_batch(store, [(r, c) for r, c in batch if r.account_id in metered])
        log_s, ledger_s = log_s + logged - started, ledger_s + time.perf_counter() - logged
    return fleet, log_s, ledger_s
