"""The "SQL injection in every header and id" rows: the payloads of
``protocol_vectors_sql`` in every header, id, path and body a gateway reads, on SQLite
and on PostgreSQL; the database fingerprinted before and after."""

from __future__ import annotations

import asyncio
import sqlite3

import asyncpg

from bench.resilience.harness import Context, Gateway, Row, gateway
from bench.resilience.money import postgres_database
from bench.resilience.protocol_exchange import Answer, call, chat_body, send
from bench.resilience.protocol_support import ADMIN_KEY, ENV, fake_upstream, few, table_row
from bench.resilience.protocol_vectors_sql import SQL_PAYLOADS, Probe, probes
from sluice.storage.factory import open_store
from tests.support.gateway import openai_connection_toml

_FINGERPRINT = (
    "SELECT (SELECT count(*) FROM accounts), (SELECT coalesce(sum(balance), 0) FROM accounts), "
    "(SELECT coalesce(sum(held), 0) FROM accounts), (SELECT count(*) FROM api_keys), "
    "(SELECT count(*) FROM api_keys WHERE revoked_at IS NOT NULL), (SELECT count(*) FROM ledger), "
    "(SELECT coalesce(sum(amount), 0) FROM ledger), (SELECT count(*) FROM holds), "
    "(SELECT count(*) FROM account_connections), (SELECT count(*) FROM account_prices), "
    "(SELECT count(*) FROM request_log)"
)
_COLUMNS = (
    "accounts", "balances", "held", "api_keys", "revoked keys", "ledger rows", "ledger sum",
    "holds", "connections", "prices", "request-log rows",
)  # fmt: skip


async def _settled_fingerprint(url: str) -> dict[str, int]:
    """The fingerprint once nothing is held: settlements written and the credit
    reservations the requests made given back (docs/metering.md#credit-reservations:
    within ``reserve_idle``, 1 s), at most 5 s on."""
    found = await _fingerprint(url)
    for _ in range(50):
        if found["held"] == 0:
            break
        await asyncio.sleep(0.1)
        found = await _fingerprint(url)
    return found


async def _fingerprint(url: str) -> dict[str, int]:
    if url.startswith("sqlite:///"):
        db = sqlite3.connect(url.removeprefix("sqlite:///"))
        try:
            values = list(db.execute(_FINGERPRINT).fetchone())
        finally:
            db.close()
    else:
        conn = await asyncpg.connect(url, timeout=5)
        try:
            record = await conn.fetchrow(_FINGERPRINT)
            assert record is not None
            values = list(record)
        finally:
            await conn.close()
    return dict(zip(_COLUMNS, (int(v) for v in values), strict=True))


async def _key(gw: Gateway) -> str:
    """A key of the account the chat probes use (not the victim's: its key listing reads
    back the names the payloads gave keys)."""
    made = await call(gw, "POST", "/admin/accounts/chatter/keys", ADMIN_KEY, b'{"name":"k"}')
    return str((made.json() or {})["key"])


async def _sql_injection(ctx: Context, backend: str, url: str) -> Row:
    fake = await fake_upstream()
    config = f'[storage]\nurl = "{url}"\n' + openai_connection_toml(fake.base_url)
    payloads = [
        p for n, p in enumerate(SQL_PAYLOADS) if ctx.tier == "full" or n % 3 == 0 or "\0" in p
    ]
    results: list[tuple[Probe, Answer]] = []
    try:
        async with gateway(ctx, config, name=f"sqli-{backend}", env=ENV) as gw:
            await call(gw, "POST", "/admin/accounts", ADMIN_KEY, b'{"name":"victim","credits":"5"}')
            made = await call(gw, "POST", "/admin/accounts/victim/keys", ADMIN_KEY, b'{"name":"k"}')
            key = (made.json() or {}).get("key", gw.key)
            first = await call(gw, "POST", "/v1/chat/completions", key, chat_body("first"))
            request_id = first.headers.get("x-request-id", "req_missing")
            await call(gw, "GET", f"/v1/requests/{request_id}", key)
            await asyncio.sleep(0.3)
            await call(
                gw, "POST", "/admin/accounts", ADMIN_KEY, b'{"name":"chatter","credits":"5"}'
            )
            minted = 3 * len(payloads)  # the chat probes' keys, made before the fingerprint
            keys = [await _key(gw) for _ in range(minted)]
            before = await _settled_fingerprint(url)
            for payload in payloads:
                chat_keys = (keys.pop(), keys.pop(), keys.pop())
                for probe in probes(payload, key, request_id, chat_keys):
                    results.append(
                        (probe, await send(gw.host, gw.port, probe.head, probe.body, wait=20))
                    )
            # read every logged request back (read-your-writes), then the key names
            logged = [(p, a) for p, a in results if p.request_logged]
            lost = 0
            mangled = 0
            for probe, answer in logged:
                rid = answer.headers.get("x-request-id", "")
                reader = str(probe.extra.get("key", key))  # the row's account's key
                back = await call(gw, "GET", f"/v1/requests/{rid}", reader)
                record = back.json() if back.status == 200 else None
                if record is None:
                    lost += 1
                elif (
                    probe.extra.get("field") == "model"
                    and record.get("requested_model") != probe.payload
                ):
                    mangled += 1
            listed = await call(gw, "GET", "/admin/accounts/victim/keys", ADMIN_KEY)
            names = [k.get("name") for k in (listed.json() or {}).get("data", [])]
            after = await _settled_fingerprint(url)
            store = await open_store(url)
            try:
                mismatches = await store.reconcile()
            finally:
                await store.close()
            tracebacks = gw.log_text().count("Traceback")
    finally:
        await fake.close()
    errors = [
        f"{p.name} [{p.payload[:20]!r}] -> {a.status or a.error}"
        for p, a in results
        if a.status is None or a.status >= 500
    ]
    bypasses = [
        f"{p.name} [{p.payload[:20]!r}]"
        for p, a in results
        if p.protected and 200 <= (a.status or 0) < 300
    ]
    injected = []
    for p, a in results:
        doc = a.json() if a.status == 200 else None
        if p.extra.get("revoke") and isinstance(doc, dict) and doc.get("revoked"):
            injected.append(f"{p.name} revoked {doc['revoked']} keys")
        elif 200 <= (a.status or 0) < 300 and p.name.startswith(
            ("GET /admin/accounts/<p>", "POST /admin/accounts/<p>", "GET /v1/requests/")
        ):
            injected.append(f"{p.name} [{p.payload[:20]!r}] -> {a.status}")
    created_keys = sum(1 for p, a in results if p.creates_key and a.status == 201)
    created_accounts = sum(
        1 for p, a in results if p.name == "POST /admin/accounts name <p>" and a.status == 201
    )
    expected = dict(before)
    expected["api_keys"] += created_keys
    expected["accounts"] += created_accounts
    expected["ledger rows"] += created_accounts  # each opens with a ledger row
    expected["request-log rows"] += len(logged)
    changed = [
        f"{k} {before[k]} -> {after[k]} (expected {expected[k]})"
        for k in _COLUMNS
        if after[k] != expected[k]
    ]
    unnamed = sum(
        1 for p, a in results if p.creates_key and a.status == 201 and p.payload not in names
    )
    slowest = max((a.seconds for _, a in results), default=0.0)
    database = (
        f"CHANGED: {few(changed, 4)}"
        if changed
        else f"unchanged but for {created_keys} keys named with the payloads, "
        f"{created_accounts} accounts and {len(logged)} request-log rows"
    )
    figure = (
        f"{len(results)} requests ({len(payloads)} payloads in Authorization, request ids, "
        f"model/models/user, admin paths and bodies): {len(errors)} 5xx, {len(bypasses)} "
        f"authentication bypasses, {len(injected)} injections; database: "
        f"{database}"
        f"; {len(logged) - lost} of {len(logged)} request-log rows read back ({mangled} with "
        f"a different model), {created_keys - unnamed} of {created_keys} key names read back; "
        f"reconcile: {len(mismatches)} mismatches; slowest answer {slowest * 1000:.0f} ms; "
        f"{tracebacks} tracebacks in the log"
    )
    if errors:
        figure += f". 5xx: {few(errors, 4)}"
    if bypasses or injected:
        figure += f". Bypasses/injections: {few(bypasses + injected, 4)}"
    return table_row(
        f"SQL injection in every header and id, {backend}",
        figure,
        "0 5xx, 0 bypasses or injections, the database unchanged but for what the requests "
        "legitimately created (every row read back exactly), reconcile clean, no answer "
        "slower than 2 s",
        not errors
        and not bypasses
        and not injected
        and not changed
        and lost == 0
        and mangled == 0
        and unnamed == 0
        and not mismatches
        and slowest < 2.0,
    )


async def sql_injection(ctx: Context) -> list[Row]:
    sqlite = await _sql_injection(ctx, "SQLite", f"sqlite:///{ctx.home('sqli-db') / 'sluice.db'}")
    async with postgres_database() as dsn:
        postgres = await _sql_injection(ctx, "PostgreSQL", dsn)
    return [sqlite, postgres]
