"""Rows about hostile bytes: malformed SSE and event streams (fuzzed), smuggling
framings, hostile bodies, the Host/path matrix, SQL injection.

The stream rows run the translators in-process (they are pure); atheris runs in a
subprocess of its own (``bench/resilience/protocol_fuzz.py``: libFuzzer ends the process
it runs in). Every other row talks raw HTTP/1.1 to real gateway processes with a fake
upstream that records what reached it. The vectors live in ``protocol_streams.py``,
``protocol_rechunk.py`` and ``protocol_vectors.py``.
"""

from __future__ import annotations

import asyncio
import json
import random
import re
import sqlite3
import sys
import traceback
from collections import Counter
from collections.abc import Awaitable, Iterable
from pathlib import Path
from typing import Any
from urllib.parse import quote

import asyncpg

from bench.resilience.harness import Context, Gateway, Row, gateway, row
from bench.resilience.money import postgres_database
from bench.resilience.protocol_fuzz import Target as FuzzTarget
from bench.resilience.protocol_fuzz import frame_input
from bench.resilience.protocol_rechunk import properties
from bench.resilience.protocol_streams import (
    BEDROCK,
    FIXTURES,
    SMALL,
    SSE_KINDS,
    CaseResult,
    check_case,
    eventstream_vectors,
    sse_cases,
    sse_vectors,
)
from bench.resilience.protocol_vectors import (
    MIB,
    SQL_PAYLOADS,
    Answer,
    Body,
    Framing,
    Probe,
    Target,
    admin_bodies,
    chat_bodies,
    chat_body,
    envelope_ok,
    feeder,
    framings,
    path_matrix,
    send,
)
from sluice.storage.factory import open_store
from tests.support.fake_openai import completion
from tests.support.fake_upstream import FakeUpstream, Reply
from tests.support.gateway import UPSTREAM_KEY, openai_connection_toml

ROOT = Path(__file__).resolve().parents[2]
ADMIN_KEY = "admin-" + "p" * 40
ENV = {"FAKE_UPSTREAM_KEY": UPSTREAM_KEY, "SLUICE_ADMIN_KEY": ADMIN_KEY}
WRONG_KEY = "sk-sluice-" + "W" * 40
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")


def _head(method: str, path: str, key: str | None, length: int | None, extra: str = "") -> bytes:
    auth = f"Authorization: Bearer {key}\r\n" if key else ""
    framing = f"Content-Length: {length}\r\n" if length is not None else ""
    return (
        f"{method} {path} HTTP/1.1\r\nHost: gateway.test\r\n{auth}"
        f"Content-Type: application/json\r\n{framing}{extra}\r\n"
    ).encode()


async def _call(gw: Gateway, method: str, path: str, key: str | None, body: bytes = b"") -> Answer:
    return await send(gw.host, gw.port, _head(method, path, key, len(body)), body)


async def _bounded(jobs: Iterable[Awaitable[Answer]], limit: int = 16) -> list[Answer]:
    gate = asyncio.Semaphore(limit)

    async def one(job: Awaitable[Answer]) -> Answer:
        async with gate:
            return await job

    return await asyncio.gather(*(one(j) for j in jobs))


def _statuses(answers: Iterable[Answer]) -> str:
    counts = Counter(a.status if a.status is not None else "none" for a in answers)
    return ", ".join(f"{k}: {v}" for k, v in sorted(counts.items(), key=lambda kv: str(kv[0])))


def _row(name: str, figure: str, criterion: str, passed: bool) -> Row:
    """A row whose figure cannot break the markdown table (a ``|`` is escaped)."""
    return Row(name, figure.replace("|", "\\|"), criterion, passed)


def _few(items: list[str], n: int = 3) -> str:
    more = f" (+{len(items) - n} more)" if len(items) > n else ""
    return "; ".join(items[:n]) + more


async def _fake() -> FakeUpstream:
    fake = FakeUpstream()
    await fake.start()
    fake.default = Reply.json(completion("ok"))
    return fake


# --- 1. malformed SSE and event streams ---------------------------------------------------


def _hand_vectors(ctx: Context) -> Row:
    rng = random.Random(ctx.seed)
    cases = sse_cases(rng)
    results: list[CaseResult] = [
        check_case(
            kind,
            name,
            data,
            bound,
            rng=rng,
            random_splits=ctx.n(1, 8),
            bytewise=ctx.tier == "full" or bound <= 4 * SMALL,
        )
        for kind, name, data, bound in cases
    ]
    n_sse = len(sse_vectors(random.Random(0)))
    n_es = len(eventstream_vectors(random.Random(0)))
    dependent = [r for r in results if r.split_dependent]
    problems = [r for r in results if r.problems]
    over = [r for r in results if r.over_bound > 0]
    sse_worst = max((r.worst for r in results if r.kind != BEDROCK), key=lambda w: w[0] / w[1])
    es_worst = max((r.worst for r in results if r.kind == BEDROCK), key=lambda w: w[0] / w[1])
    notes = []
    if dependent:
        names = sorted({r.name.removesuffix(" (in a valid stream)") for r in dependent})
        notes.append(f"split-dependent: {_few(names, 8)}")
    if problems:
        notes.append(f"raised: {_few([f'{r.kind} {r.name}: {r.problems[0]}' for r in problems])}")
    if over:
        names = sorted({r.name.removesuffix(" (in a valid stream)") for r in over})
        notes.append(f"over the bound: {_few(names, 5)}")
    figure = (
        f"{n_sse} SSE vectors x {len(SSE_KINDS)} translators + {n_es} event-stream vectors "
        f"(Bedrock), each alone and inside a valid stream ({len(cases)} cases), fed whole, "
        f"{'byte by byte' if ctx.tier == 'full' else 'byte by byte (61-byte reads above 4 KiB)'}"
        f" and at {ctx.n(1, 8)} random splits: {len(dependent)} split-dependent, "
        f"{len(problems)} raising from feed or finish (not an ApiError), {len(over)} with "
        f"buffered above the bound (worst: SSE {sse_worst[0]} of {sse_worst[1]}, event "
        f"stream {es_worst[0]} of {es_worst[1]} with the last read)"
    )
    if notes:
        figure += ". " + ". ".join(notes)
    return _row(
        "malformed SSE and event streams: hand vectors",
        figure,
        "one transcript whatever the split; feed never raises; finish raises only an "
        "ApiError; buffered <= max_event_bytes (event stream: + the last read)",
        not dependent and not problems and not over,
    )


def _rechunking(ctx: Context) -> Row:
    results = properties(ctx.n(60, 2000), ctx.seed, shrink=ctx.tier == "full")
    failed = [r for r in results if r.failure is not None]
    parts = [
        f"{r.name} ({r.examples} examples): "
        + ("holds" if r.failure is None else f"FAILS: {r.failure[:220]}")
        for r in results
    ]
    return _row(
        "malformed SSE and event streams: hypothesis rechunking",
        f"{len(results) - len(failed)} of {len(results)} properties hold. " + "; ".join(parts),
        "every property holds (identical transcripts for any split of valid and hostile "
        "streams, SSEDecoder = the WHATWG reference with its documented bound, buffered "
        "within the bound)",
        not failed,
    )


def _seed_corpus(directory: Path) -> int:
    directory.mkdir(parents=True, exist_ok=True)
    seeds: list[bytes] = []
    for selector, folders in ((0, SSE_KINDS), (1, (BEDROCK,)), (2, ("openai",))):
        for folder in folders:
            for path in sorted((FIXTURES / folder).glob("*.raw")):
                seeds.append(frame_input(selector, SMALL, 7, path.read_bytes()[:16000]))
    rng = random.Random(0)
    for vector in sse_vectors(rng):
        if len(vector.data) <= 16000:
            seeds.append(frame_input(0, SMALL, 3, vector.data))
            seeds.append(frame_input(2, SMALL, 5, vector.data))
    for vector in eventstream_vectors(rng):
        if len(vector.data) <= 16000:
            seeds.append(frame_input(1, SMALL, 3, vector.data))
    for n, seed in enumerate(seeds):
        (directory / f"seed-{n:03d}").write_bytes(seed)
    return len(seeds)


async def _atheris(ctx: Context) -> Row:
    home = ctx.home("fuzz")
    corpus, artifacts, stats = home / "corpus", home / "artifacts", home / "stats.json"
    seeds = _seed_corpus(corpus)
    runs, seconds = ctx.n(2_000, 200_000), ctx.n(30, 60)
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "bench.resilience.protocol_fuzz",
        "--runs",
        str(runs),
        "--seconds",
        str(seconds),
        "--stats",
        str(stats),
        "--artifacts",
        str(artifacts),
        "--seed",
        str(ctx.seed),
        str(corpus),
        cwd=ROOT,
        stdout=asyncio.subprocess.DEVNULL,
        stderr=asyncio.subprocess.PIPE,
    )
    try:
        _, err = await asyncio.wait_for(proc.communicate(), seconds + 120)
    except TimeoutError:
        proc.kill()
        await proc.wait()
        err = b"(killed: no end after the time budget)"
    log = err.decode(errors="replace")
    (home / "fuzz.log").write_text(log)
    done = re.search(r"stat::number_of_executed_units: (\d+)", log)
    executed = int(done.group(1)) if done else 0
    crashes = len(list(artifacts.glob("crash-*"))) + len(list(artifacts.glob("timeout-*")))
    if proc.returncode != 0 and not crashes:
        crashes = 1
    doc: dict[str, Any] = json.loads(stats.read_text()) if stats.exists() else {"decoders": {}}
    crash_note = ""
    if crashes:
        crash_note = f" (the process: {_replay(sorted(artifacts.glob('*-*'))[:1])})"
    unexpected: dict[str, dict[str, Any]] = doc.get("unexpected", {})
    if unexpected:
        crashes += sum(e["count"] for e in unexpected.values())
        crash_note += (
            " ("
            + "; ".join(
                f"{kind} in {e['count']} inputs: {e['message'][:80]}, first on {e['first'][:64]}..."
                for kind, e in unexpected.items()
            )
            + ")"
        )
    parts, over_cap, dependent = [], 0, 0
    for name, entry in doc["decoders"].items():
        worst = entry["worst"]
        split = entry["split_dependent"]
        over_cap += entry["over_cap"]
        dependent += split["long_line"] + split["other"]
        part = (
            f"{name}: {entry['inputs']} inputs, worst buffered {worst['buffered']} of cap "
            f"{worst['cap']}, over the cap in {entry['over_cap']}, split-dependent in "
            f"{split['long_line'] + split['other']}"
        )
        if split["long_line"] or split["other"]:
            part += f" ({split['other']} without a line longer than the bound)"
        if entry.get("flush_too_large"):
            part += f", flush() raised EventTooLargeError in {entry['flush_too_large']}"
        parts.append(part)
    return _row(
        "malformed SSE and event streams: atheris",
        f"{executed} runs from {seeds} seeds ({ctx.n(2_000, 200_000)} runs or {seconds} s): "
        f"{crashes} crashes (inputs raising an unexpected exception){crash_note}; "
        + "; ".join(parts),
        "0 crashes (only the expected exceptions), buffered within its cap, the same "
        "result for the input whole and split",
        executed > 0 and crashes == 0 and over_cap == 0 and dependent == 0,
    )


def _replay(paths: list[Path]) -> str:
    """What a crash artifact raises when the target runs it here, and the input."""
    if not paths:
        return "no artifact; see the libFuzzer output"
    data = paths[0].read_bytes()
    try:
        FuzzTarget(None, 1).one(data)
    except Exception as exc:
        frames = traceback.extract_tb(exc.__traceback__)
        where = next(
            (
                f"{Path(f.filename).name}:{f.lineno}"
                for f in reversed(frames)
                if "sluice" in f.filename
            ),
            "?",
        )
        return (
            f"{type(exc).__name__}: {str(exc)[:90]} at {where}, on the {len(data)}-byte input "
            f"{data[:48].hex()}..."
        )
    return f"{paths[0].name} does not fail when replayed ({len(data)} bytes)"


@row("malformed SSE and event streams")
async def malformed_streams(ctx: Context) -> list[Row]:
    """Every stream translator against hostile bytes: hand vectors, hypothesis, atheris."""
    return [_hand_vectors(ctx), _rechunking(ctx), await _atheris(ctx)]


# --- 2. request smuggling framings ---------------------------------------------------------


def _refused(answer: Answer) -> bool:
    status = answer.status
    return status is not None and (400 <= status < 500 or status in (501, 505))


@row("request smuggling framings")
async def smuggling(ctx: Context) -> list[Row]:
    """Each framing straight to a gateway on a socket of its own, with the valid key and a
    body that would reach the upstream if the framing were accepted."""
    fake = await _fake()
    config = openai_connection_toml(fake.base_url)
    try:
        async with gateway(ctx, config, name="smuggling", env=ENV) as gw:
            vectors = framings(gw.key)
            answers = await _bounded(
                send(
                    gw.host,
                    gw.port,
                    v.head,
                    v.body,
                    stream=v.stream,
                    wait=15,
                    responses=v.expect_upstream if v.kind == "control" else 1,
                )
                for v in vectors
            )
            await asyncio.sleep(0.5)  # a pipelined leftover would be served by now
            log = gw.log_text()
    finally:
        await fake.close()
    reached = Counter(
        m.group(0) for r in fake.requests for m in re.finditer(rb"framing-\d{3}", r.body)
    )

    def count(v: Framing) -> int:
        return reached[v.marker.encode()]

    rows = []
    for kind, title in (
        ("vector", "request smuggling framings"),
        ("host", "Host header (RFC 9112 §3.2)"),
    ):
        picked = [(v, a) for v, a in zip(vectors, answers, strict=True) if v.kind == kind]
        if kind == "vector":
            good = [(v, a) for v, a in picked if _refused(a) and count(v) == 0]
        else:
            good = [(v, a) for v, a in picked if a.status == 400 and count(v) == 0]
        bad = [f"{v.name} -> {a.status or a.error}" for v, a in picked if (v, a) not in good]
        leaked = sum(count(v) for v, _ in picked)
        figure = (
            f"{len(picked)} vectors, {sum(_refused(a) for _, a in picked)} refused "
            f"({_statuses(a for _, a in picked)}), {leaked} reached the upstream"
        )
        if kind == "vector":
            controls = [
                (v, a) for v, a in zip(vectors, answers, strict=True) if v.kind == "control"
            ]
            served = [v for v, a in controls if a.status == 200 and count(v) == v.expect_upstream]
            figure += f"; {len(served)} of {len(controls)} valid controls served"
            bad += [f"control {v.name} not served" for v, _ in controls if v not in served]
            criterion = (
                "every vector refused (4xx, or 501/505) and none reaches the upstream; every "
                "valid control served"
            )
        else:
            criterion = "400 for a missing, repeated or invalid Host; none reaches the upstream"
        if bad:
            figure += f". Not refused: {_few(bad, 6)}"
        if "Traceback" in log:
            figure += ". Traceback in the gateway log"
        rows.append(_row(title, figure, criterion, not bad and "Traceback" not in log))
    return rows


# --- 3. hostile bodies ------------------------------------------------------------------------


async def _send_body(gw: Gateway, key: str, b: Body) -> Answer:
    if b.oversize and b.chunked:
        head = _head(b.method, b.path, key, None, "Transfer-Encoding: chunked\r\n")
        piece = b"%x\r\n%s\r\n" % (MIB, b"[" * MIB)
        parts = [piece] * (b.oversize // MIB) + [b"1\r\n[\r\n0\r\n\r\n"]
        return await send(gw.host, gw.port, head, stream=feeder(parts), wait=30)
    if b.oversize:
        head = _head(b.method, b.path, key, b.oversize)
        return await send(gw.host, gw.port, head, b"[" * 65536, wait=30)
    return await send(gw.host, gw.port, _head(b.method, b.path, key, len(b.body)), b.body, wait=30)


@row("hostile bodies")
async def hostile_bodies(ctx: Context) -> list[Row]:
    """Bodies built to break a decoder, to POST /v1/chat/completions and the admin API."""
    fake = await _fake()
    config = openai_connection_toml(fake.base_url)
    chat, admin = chat_bodies(), admin_bodies()
    verdicts: list[tuple[Body, Answer, bool]] = []
    try:
        async with gateway(ctx, config, name="bodies", env=ENV, log_level="DEBUG") as gw:
            await _call(
                gw, "POST", "/admin/accounts", ADMIN_KEY, b'{"name":"victim","credits":"1"}'
            )
            for b in [*chat, *admin]:
                key = gw.key if b.path.startswith("/v1/") else ADMIN_KEY
                before = len(fake.requests)
                answer = await _send_body(gw, key, b)
                sent = fake.requests[before:]
                if b.refuse:
                    error = (answer.json() or {}).get("error") if envelope_ok(answer) else None
                    ok = (
                        answer.status is not None
                        and 400 <= answer.status < 500
                        and error is not None
                        and (b.status is None or answer.status == b.status)
                        and (b.param is None or error["param"] == b.param)
                        and not sent
                    )
                else:
                    ok = (
                        answer.status == 200
                        and len(sent) == 1
                        and (b.forwarded is None or b.forwarded(sent[0].body))
                    )
                verdicts.append((b, answer, ok))
            tracebacks = gw.log_text().count("Traceback")
    finally:
        await fake.close()
    refused = [(b, a, ok) for b, a, ok in verdicts if b.refuse]
    accepted = [(b, a, ok) for b, a, ok in verdicts if not b.refuse]
    errors_5xx = [f"{b.name} -> {a.status}" for b, a, _ in verdicts if (a.status or 0) >= 500]
    wrong = [
        f"{b.name} -> {a.status}"
        + (f" param {(a.json() or {}).get('error', {}).get('param')!r}" if envelope_ok(a) else "")
        for b, a, ok in verdicts
        if not ok and (a.status or 0) < 500
    ]
    n_chat = sum(1 for b, _, _ in refused if b.path.startswith("/v1/"))
    figure = (
        f"{len(refused)} hostile bodies ({n_chat} to /v1/chat/completions, "
        f"{len(refused) - n_chat} to the admin API): "
        f"{sum(ok for _, _, ok in refused)} refused with the error envelope "
        f"({_statuses(a for _, a, _ in refused)}); {sum(ok for _, _, ok in accepted)} of "
        f"{len(accepted)} accepted by design and forwarded re-encoded; {len(errors_5xx)} "
        f"answered 5xx; {tracebacks} tracebacks in the DEBUG log"
    )
    if errors_5xx:
        figure += f". 5xx: {_few(errors_5xx, 6)}"
    if wrong:
        figure += f". Not as expected: {_few(wrong, 4)}"
    return [
        _row(
            "hostile bodies",
            figure,
            "every hostile body a 4xx with the JSON error envelope (413 when too large, the "
            "field named for refused overrides and bad values), 0 5xx, no Traceback in the "
            "gateway's DEBUG log; bodies accepted by design forwarded re-encoded",
            not errors_5xx and not wrong and tracebacks == 0,
        )
    ]


# --- 4. the Host/path matrix ------------------------------------------------------------------

_PROTECTED_MARKS = (
    b'"object":"list"',
    b"test/gpt-fake",
    b"# HELP",
    b"sluice_",
    b'"account_id"',
    b'"balance"',
    b'"prefix"',
    b"chat.completion",
)


def _leaks(answer: Answer) -> bool:
    status = answer.status or 0
    return 200 <= status < 300 or any(mark in answer.body for mark in _PROTECTED_MARKS)


async def _probe(gw: Gateway, t: Target) -> Answer:
    host = f"Host: {t.host}\r\n" if t.host is not None else ""
    body = chat_body("matrix") if t.method == "POST" else b""
    head = (
        f"{t.method} {t.target} HTTP/1.1\r\n{host}{t.auth}Content-Length: {len(body)}\r\n\r\n"
    ).encode()
    return await send(gw.host, gw.port, head, body, head_only=t.method == "HEAD")


@row("Host/path matrix")
async def host_path_matrix(ctx: Context) -> list[Row]:
    """Spellings of every protected path, every method, every Host, without the right key."""
    fake = await _fake()
    config = openai_connection_toml(fake.base_url)
    try:
        async with gateway(ctx, config, name="matrix", env=ENV) as gw:
            first = await _call(gw, "POST", "/v1/chat/completions", gw.key, chat_body("row"))
            request_id = first.headers.get("x-request-id", "req_missing")
            await _call(
                gw, "POST", "/admin/accounts", ADMIN_KEY, b'{"name":"victim","credits":"1"}'
            )
            await _call(gw, "GET", f"/v1/requests/{request_id}", gw.key)  # written by now
            protected = [
                "/v1/models",
                "/metrics",
                f"/v1/requests/{request_id}",
                "/admin/accounts/victim",
                "/admin/accounts/victim/keys",
                "/v1/chat/completions",
            ]
            targets = path_matrix(protected, gw.key, ADMIN_KEY, WRONG_KEY)
            total, spellings = len(targets), len({t.target for t in targets})
            if ctx.tier == "fast":
                targets = random.Random(ctx.seed).sample(targets, 320)
            upstream_before = len(fake.requests)
            answers = await _bounded(_probe(gw, t) for t in targets)
            reached = len(fake.requests) - upstream_before
            log = gw.log_text()
    finally:
        await fake.close()
    leaks = [
        f"{t.method} {t.target[:60]} ({t.auth_name}) -> {a.status}"
        for t, a in zip(targets, answers, strict=True)
        if _leaks(a)
    ]
    errors = [
        f"{t.method} {t.target[:60]} -> {a.status or a.error}"
        for t, a in zip(targets, answers, strict=True)
        if a.status is None or a.status >= 500
    ]
    figure = (
        f"{len(targets)} requests (of {total}: {len(protected)} protected paths in "
        f"{spellings} spellings, GET/HEAD/POST/OPTIONS/TRACE, no key / a wrong key / garbage / "
        f"Basic / the key in the query / X-Api-Key / the other key, 10 Host values): by "
        f"status {_statuses(answers)}; {len(leaks)} returned protected data; {reached} "
        f"reached the upstream"
    )
    if leaks:
        figure += f". Leaks: {_few(leaks, 4)}"
    if errors:
        figure += f". 5xx or no answer: {_few(errors, 4)}"
    ok = not leaks and not errors and reached == 0 and "Traceback" not in log
    return [
        _row(
            "Host/path matrix",
            figure,
            "0 answers with protected data without the right key (no 2xx: no model list, "
            "request row, metrics or admin data), 0 5xx, nothing reaches the upstream",
            ok,
        )
    ]


# --- 5. SQL injection -------------------------------------------------------------------------

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


def _in_path(payload: str) -> str:
    """The payload as a path segment: raw where the request line allows it."""
    return quote(payload, safe="!$&'()*+,;=:@\"<>[]^`{|}\\-._~")


def _probes(payload: str, key: str, request_id: str) -> list[Probe]:
    seg = _in_path(payload)
    admin = ADMIN_KEY
    body = json.dumps
    out = [
        Probe(
            f"Bearer <p> on {p}",
            _head(m, p, None, 0, f"Authorization: Bearer {payload}\r\n"),
            protected=True,
        )
        for m, p in (
            ("GET", "/v1/models"),
            ("GET", "/metrics"),
            ("GET", f"/v1/requests/{request_id}"),
            ("POST", "/v1/chat/completions"),
            ("GET", "/admin/accounts/victim"),
        )
    ]
    out += [
        Probe(
            "Authorization: <p>",
            _head("GET", "/v1/models", None, 0, f"Authorization: {payload}\r\n"),
            protected=True,
        ),
        Probe(
            "Bearer sk-sluice-<p>",
            _head("GET", "/v1/models", None, 0, f"Authorization: Bearer sk-sluice-{payload}\r\n"),
            protected=True,
        ),
        Probe("GET /v1/requests/<p>", _head("GET", f"/v1/requests/{seg}", key, 0), payload=payload),
        Probe(
            "GET /v1/requests/req_<p>",
            _head("GET", f"/v1/requests/req_{seg}", key, 0),
            payload=payload,
        ),
    ]
    for field, value in (("model", payload), ("models", [payload]), ("user", payload)):
        doc: dict[str, Any] = {
            "model": "no/such-model",
            "messages": [{"role": "user", "content": payload}],
        }
        doc[field] = value
        raw = body(doc).encode()
        out.append(
            Probe(
                f"chat {field}: <p>",
                _head("POST", "/v1/chat/completions", key, len(raw)),
                raw,
                payload=payload,
                # a model name with control characters is refused as invalid, unlogged
                request_logged=field == "user" or not _CONTROL.search(payload),
                extra={"field": field},
            )
        )
    admin_calls: list[tuple[str, str, str, bytes, dict[str, Any]]] = [
        ("GET /admin/accounts/<p>", "GET", f"/admin/accounts/{seg}", b"", {}),
        ("GET /admin/accounts/<p>/keys", "GET", f"/admin/accounts/{seg}/keys", b"", {}),
        (
            "GET /admin/accounts/<p>/connections",
            "GET",
            f"/admin/accounts/{seg}/connections",
            b"",
            {},
        ),
        ("POST /admin/accounts/<p>/keys", "POST", f"/admin/accounts/{seg}/keys", b"{}", {}),
        (
            "POST /admin/accounts/<p>/credits",
            "POST",
            f"/admin/accounts/{seg}/credits",
            b'{"amount":"1"}',
            {},
        ),
        (
            "PUT connection <p>",
            "PUT",
            f"/admin/accounts/victim/connections/{seg}",
            b'{"provider":"openai","models":{}}',
            {},
        ),
        ("DELETE connection <p>", "DELETE", f"/admin/accounts/victim/connections/{seg}", b"", {}),
        (
            "PUT price of model <p>",
            "PUT",
            f"/admin/accounts/victim/prices/{seg}",
            b'{"input":1,"output":1}',
            {},
        ),
        (
            "POST /admin/accounts name <p>",
            "POST",
            "/admin/accounts",
            body({"name": payload}).encode(),
            {},
        ),
        (
            "POST credits amount <p>",
            "POST",
            "/admin/accounts/victim/credits",
            body({"amount": payload}).encode(),
            {},
        ),
        (
            "revoke prefix sk-sluice-<p>",
            "POST",
            "/admin/keys/revoke",
            body({"prefix": "sk-sluice-" + payload}).encode(),
            {"revoke": True},
        ),
        (
            "revoke prefix <p>",
            "POST",
            "/admin/keys/revoke",
            body({"prefix": payload}).encode(),
            {"revoke": True},
        ),
        (
            "new key named <p>",
            "POST",
            "/admin/accounts/victim/keys",
            body({"name": payload}).encode(),
            {},
        ),
    ]
    for name, method, path, raw, extra in admin_calls:
        out.append(
            Probe(
                name,
                _head(method, path, admin, len(raw)),
                raw,
                payload=payload,
                creates_key=name == "new key named <p>",
                extra=extra,
            )
        )
    return out


async def _sql_injection(ctx: Context, backend: str, url: str) -> Row:
    fake = await _fake()
    config = f'[storage]\nurl = "{url}"\n' + openai_connection_toml(fake.base_url)
    payloads = [
        p for n, p in enumerate(SQL_PAYLOADS) if ctx.tier == "full" or n % 3 == 0 or "\0" in p
    ]
    results: list[tuple[Probe, Answer]] = []
    try:
        async with gateway(ctx, config, name=f"sqli-{backend}", env=ENV) as gw:
            await _call(
                gw, "POST", "/admin/accounts", ADMIN_KEY, b'{"name":"victim","credits":"5"}'
            )
            made = await _call(
                gw, "POST", "/admin/accounts/victim/keys", ADMIN_KEY, b'{"name":"k"}'
            )
            key = (made.json() or {}).get("key", gw.key)
            first = await _call(gw, "POST", "/v1/chat/completions", key, chat_body("first"))
            request_id = first.headers.get("x-request-id", "req_missing")
            await _call(gw, "GET", f"/v1/requests/{request_id}", key)
            await asyncio.sleep(0.3)
            before = await _fingerprint(url)
            for payload in payloads:
                for probe in _probes(payload, key, request_id):
                    results.append(
                        (probe, await send(gw.host, gw.port, probe.head, probe.body, wait=20))
                    )
            # read every logged request back (read-your-writes), then the key names
            logged = [(p, a) for p, a in results if p.request_logged]
            lost = 0
            mangled = 0
            for probe, answer in logged:
                rid = answer.headers.get("x-request-id", "")
                back = await _call(gw, "GET", f"/v1/requests/{rid}", key)
                record = back.json() if back.status == 200 else None
                if record is None:
                    lost += 1
                elif (
                    probe.extra.get("field") == "model"
                    and record.get("requested_model") != probe.payload
                ):
                    mangled += 1
            listed = await _call(gw, "GET", "/admin/accounts/victim/keys", ADMIN_KEY)
            names = [k.get("name") for k in (listed.json() or {}).get("data", [])]
            await asyncio.sleep(0.3)
            after = await _fingerprint(url)
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
        f"CHANGED: {_few(changed, 4)}"
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
        figure += f". 5xx: {_few(errors, 4)}"
    if bypasses or injected:
        figure += f". Bypasses/injections: {_few(bypasses + injected, 4)}"
    return _row(
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


@row("SQL injection in every header and id")
async def sql_injection(ctx: Context) -> list[Row]:
    sqlite = await _sql_injection(ctx, "SQLite", f"sqlite:///{ctx.home('sqli-db') / 'sluice.db'}")
    async with postgres_database() as dsn:
        postgres = await _sql_injection(ctx, "PostgreSQL", dsn)
    return [sqlite, postgres]
