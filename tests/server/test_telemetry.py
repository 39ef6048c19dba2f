"""OpenTelemetry tracing (``[telemetry]``, docs/observability.md) against a running
gateway: spans exported to an in-memory exporter through the composition root's seam,
the GenAI attributes equal to the request log's row, trace context taken from the
client and passed to each upstream try, nothing secret in any attribute, nothing at
all when tracing is off, and a collector that cannot be reached slows nothing."""

from __future__ import annotations

import json
import os
import socket
import sys
import time
from collections.abc import AsyncIterator, Iterator, Sequence
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind, StatusCode

from sluice.accounts.dev_key import ensure_dev_key
from sluice.config import parse_config
from sluice.errors import ConfigError
from sluice.exchange.telemetry import NO_TELEMETRY, build_telemetry
from sluice.server.compose import create_app
from sluice.server.lifecycle import RunningGateway, stop_gateway
from sluice.server.listener import listen
from sluice.server.reload import effective
from sluice.settings import Settings, TelemetrySettings, build_settings
from sluice.storage.factory import open_store
from tests.support.fake_openai import completion
from tests.support.fake_upstream import FakeUpstream, Reply
from tests.support.gateway import UPSTREAM_KEY, openai_connection_toml, running_gateway
from tests.support.raw_http import RawResponse, exchange, get, post

ENV = {"FAKE_UPSTREAM_KEY": UPSTREAM_KEY}
TRACE_ID = "4bf92f3577b34da6a3ce929d0e0e4736"
PARENT_ID = "00f067aa0ba902b7"
TRACEPARENT = f"00-{TRACE_ID}-{PARENT_ID}-01"
CANARY_PROMPT = "canary-prompt-7f3e9a1c"
CANARY_ANSWER = "canary-answer-51d0b2e8"
TELEMETRY = '[telemetry]\notlp_endpoint = "http://127.0.0.1:4318/v1/traces"\n'


@asynccontextmanager
async def traced_gateway(
    home: Path, config: str, exporter: InMemorySpanExporter, telemetry: str = TELEMETRY
) -> AsyncIterator[RunningGateway]:
    """A gateway as ``start_gateway`` starts one, its spans going to ``exporter``."""
    text = "[server]\nport = 0\n" + telemetry + config
    settings = build_settings(parse_config(text), ENV, home)
    store = await open_store(settings.storage_url)
    dev_key = await ensure_dev_key(store, home, lambda p: f"{p}_dev", os.urandom(32), 0)
    gateway = create_app(settings, store, span_exporter=exporter)
    await gateway.start()
    listener = await listen(
        gateway.handle, gateway.limits, gateway.refused, settings.server.host, 0
    )
    host, port = listener.address
    running = RunningGateway(gateway, listener, dev_key, host, port)
    try:
        yield running
    finally:
        await stop_gateway(running)  # flushes the batch processor into ``exporter``


@pytest.fixture
async def upstreams() -> AsyncIterator[tuple[FakeUpstream, FakeUpstream]]:
    a, b = FakeUpstream(), FakeUpstream()
    await a.start()
    await b.start()
    try:
        yield a, b
    finally:
        await a.close()
        await b.close()


def failover_config(a: FakeUpstream, b: FakeUpstream) -> str:
    return f"""
[[connections]]
id = "conn_a"
provider = "openai-compatible"
base_url = "{a.base_url}"
api_key_env = "FAKE_UPSTREAM_KEY"

[[connections]]
id = "conn_b"
provider = "openai-compatible"
base_url = "{b.base_url}"
api_key_env = "FAKE_UPSTREAM_KEY"

[[models]]
id = "test/a"
providers = {{ conn_a = "model-a" }}

[[models]]
id = "test/b"
providers = {{ conn_b = "model-b" }}

[[routes]]
name = "bot"
chain = [ {{ model = "test/a" }}, {{ model = "test/b" }} ]
"""


def body(model: str, *, stream: bool = False, **extra: Any) -> bytes:
    messages = [{"role": "user", "content": f"say {CANARY_PROMPT}"}]
    return json.dumps({"model": model, "messages": messages, "stream": stream, **extra}).encode()


async def chat(gw: RunningGateway, payload: bytes, headers: str = "") -> RawResponse:
    assert gw.dev_key is not None
    request = post("/v1/chat/completions", payload, gw.dev_key.key, extra=headers)
    return await exchange(gw.host, gw.port, request)


async def row(gw: RunningGateway, resp: RawResponse) -> dict[str, Any]:
    assert gw.dev_key is not None
    path = f"/v1/requests/{resp.headers['x-request-id']}"
    got: dict[str, Any] = (await exchange(gw.host, gw.port, get(path, gw.dev_key.key))).json()
    return got


def split(spans: Sequence[ReadableSpan]) -> tuple[ReadableSpan, list[ReadableSpan]]:
    """The one request span, and its attempt spans in start order."""
    (request,) = [s for s in spans if s.kind is SpanKind.SERVER]
    tries = sorted((s for s in spans if s.kind is SpanKind.CLIENT), key=lambda s: s.start_time or 0)
    return request, tries


def attrs(span: ReadableSpan) -> dict[str, Any]:
    return dict(span.attributes or {})


def traceparent_ids(value: str) -> tuple[str, str]:
    _, trace_id, span_id, _ = value.split("-")
    return trace_id, span_id


async def test_the_request_span_carries_the_genai_attributes(tmp_path: Path) -> None:
    exporter = InMemorySpanExporter()
    async with traced_gateway(tmp_path, "", exporter) as gw:
        resp = await chat(gw, body("sluice/demo", max_tokens=5, temperature=0.5))
        assert resp.status == 200, resp.body
        logged = await row(gw, resp)
    request, (attempt,) = split(exporter.get_finished_spans())
    got = attrs(request)
    assert request.name == "chat sluice/demo"
    assert got["gen_ai.operation.name"] == "chat"
    assert got["gen_ai.request.model"] == "sluice/demo"
    assert got["gen_ai.response.model"] == logged["served_model"]
    assert got["gen_ai.provider.name"] == logged["provider"]
    assert got["gen_ai.usage.input_tokens"] == logged["prompt_tokens"] > 0
    assert got["gen_ai.usage.output_tokens"] == logged["completion_tokens"] > 0
    assert got["gen_ai.request.max_tokens"] == 5
    assert got["gen_ai.request.temperature"] == 0.5
    assert got["gen_ai.response.finish_reasons"] == (logged["finish_reason"],)
    assert got["gen_ai.response.id"] == got["sluice.request_id"] == logged["id"]
    assert got["sluice.front_door"] == "chat"
    assert got["sluice.route"] == logged["route"] == "primary"
    assert got["sluice.cost_usd"] == logged["cost"]
    assert got["http.response.status_code"] == 200
    assert request.status.status_code is StatusCode.UNSET
    assert request.parent is None
    assert attempt.parent is not None and attempt.parent.span_id == request.context.span_id
    assert attrs(attempt)["sluice.attempt.outcome"] == "served"
    assert attrs(attempt)["sluice.connection"] == logged["connection"]
    assert request.resource.attributes["service.name"] == "sluice"
    assert request.start_time is not None and request.end_time is not None
    duration_ms = (request.end_time - request.start_time) / 1e6
    assert duration_ms >= logged["duration_ms"] * 0.5


async def test_a_streamed_request_span_ends_with_its_stream(tmp_path: Path) -> None:
    exporter = InMemorySpanExporter()
    async with traced_gateway(tmp_path, "", exporter) as gw:
        resp = await chat(gw, body("sluice/demo", stream=True, max_tokens=8))
        assert resp.status == 200
        logged = await row(gw, resp)
    request, (attempt,) = split(exporter.get_finished_spans())
    assert attrs(request)["sluice.stream"] is True
    assert attrs(request)["gen_ai.usage.output_tokens"] == logged["completion_tokens"]
    assert attempt.end_time == request.end_time  # the served stream lasted to the end


async def test_the_client_traceparent_is_the_parent_and_goes_upstream(
    tmp_path: Path, upstreams: tuple[FakeUpstream, FakeUpstream]
) -> None:
    upstream, _ = upstreams
    upstream.queue(Reply.json(completion("hello")))
    exporter = InMemorySpanExporter()
    headers = f"traceparent: {TRACEPARENT}\r\ntracestate: vendor=abc\r\n"
    async with traced_gateway(tmp_path, openai_connection_toml(upstream.base_url), exporter) as gw:
        resp = await chat(gw, body("test/gpt-fake"), headers)
        assert resp.status == 200, resp.body
    request, (attempt,) = split(exporter.get_finished_spans())
    assert format(request.context.trace_id, "032x") == TRACE_ID
    assert request.parent is not None and format(request.parent.span_id, "016x") == PARENT_ID
    (sent,) = upstream.requests
    trace_id, span_id = traceparent_ids(sent.headers["traceparent"])
    assert trace_id == TRACE_ID
    assert span_id == format(attempt.context.span_id, "016x")
    assert sent.headers["tracestate"] == "vendor=abc"
    got = attrs(attempt)
    assert (got["server.address"], got["server.port"]) == ("127.0.0.1", upstream.port)
    assert got["gen_ai.request.model"] == "test/gpt-fake"


async def test_a_failed_try_then_failover_gives_two_attempt_spans(
    tmp_path: Path, upstreams: tuple[FakeUpstream, FakeUpstream]
) -> None:
    a, b = upstreams
    a.queue(Reply.json({"error": {"message": "boom"}}, status=500))
    b.queue(Reply.json(completion("from b")))
    exporter = InMemorySpanExporter()
    async with traced_gateway(tmp_path, failover_config(a, b), exporter) as gw:
        resp = await chat(gw, body("bot"))
        assert resp.status == 200, resp.body
        logged = await row(gw, resp)
    request, (first, second) = split(exporter.get_finished_spans())
    assert first.status.status_code is StatusCode.ERROR
    failed = logged["attempts"][0]
    assert attrs(first)["error.type"] == failed["code"] == "upstream_http_error"
    assert attrs(first)["sluice.attempt.outcome"] == failed["outcome"] == "upstream_error"
    assert attrs(first)["sluice.connection"] == "conn_a"
    assert second.status.status_code is StatusCode.UNSET
    assert attrs(second)["sluice.connection"] == "conn_b"
    assert attrs(second)["gen_ai.usage.input_tokens"] == logged["prompt_tokens"]
    assert attrs(request)["sluice.route"] == "standby_a"
    assert attrs(request)["sluice.route_name"] == "bot"
    for upstream, span in ((a, first), (b, second)):
        (sent,) = upstream.requests
        assert traceparent_ids(sent.headers["traceparent"]) == (
            format(request.context.trace_id, "032x"),
            format(span.context.span_id, "016x"),
        )
        assert span.parent is not None and span.parent.span_id == request.context.span_id


async def test_a_failed_request_is_an_error_span(
    tmp_path: Path, upstreams: tuple[FakeUpstream, FakeUpstream]
) -> None:
    upstream, _ = upstreams
    upstream.queue(Reply.json({"error": {"message": "bad"}}, status=400))
    exporter = InMemorySpanExporter()
    async with traced_gateway(tmp_path, openai_connection_toml(upstream.base_url), exporter) as gw:
        resp = await chat(gw, body("test/gpt-fake"))
        logged = await row(gw, resp)
    request, (attempt,) = split(exporter.get_finished_spans())
    assert resp.status == 400
    assert request.status.status_code is StatusCode.ERROR
    assert attrs(request)["error.type"] == (logged["error_code"] or logged["error_type"])
    assert attrs(request)["http.response.status_code"] == 400
    assert attempt.status.status_code is StatusCode.ERROR


def texts(spans: Sequence[ReadableSpan]) -> Iterator[str]:
    """Every string a span exports: its name, status, attributes, events, resource."""
    for span in spans:
        yield span.name
        yield span.status.description or ""
        for bag in (span.attributes, span.resource.attributes):
            for name, value in (bag or {}).items():
                yield name
                yield from (str(v) for v in value) if isinstance(value, tuple) else (str(value),)
        for event in span.events:
            yield event.name
            yield from (str(v) for v in (event.attributes or {}).values())


async def test_no_prompt_answer_or_key_in_any_attribute(
    tmp_path: Path, upstreams: tuple[FakeUpstream, FakeUpstream]
) -> None:
    a, b = upstreams
    quoted = f"you sent {CANARY_PROMPT} with key {UPSTREAM_KEY}"
    a.queue(Reply.json({"error": {"message": quoted}}, status=500))
    b.queue(Reply.json(completion(CANARY_ANSWER)))
    exporter = InMemorySpanExporter()
    async with traced_gateway(tmp_path, failover_config(a, b), exporter) as gw:
        resp = await chat(gw, body("bot"))
        assert resp.status == 200 and CANARY_ANSWER.encode() in resp.body
    spans = exporter.get_finished_spans()
    assert len(spans) == 3
    for text in texts(spans):
        for canary in (CANARY_PROMPT, CANARY_ANSWER, UPSTREAM_KEY, "sk-sluice"):
            assert canary not in text


async def test_a_sample_ratio_of_zero_records_only_what_a_client_traces(
    tmp_path: Path, upstreams: tuple[FakeUpstream, FakeUpstream]
) -> None:
    upstream, _ = upstreams
    upstream.queue(Reply.json(completion("one")), Reply.json(completion("two")))
    exporter = InMemorySpanExporter()
    config = openai_connection_toml(upstream.base_url)
    unsampled = TELEMETRY + "sample_ratio = 0.0\n"
    async with traced_gateway(tmp_path, config, exporter, unsampled) as gw:
        assert (await chat(gw, body("test/gpt-fake"))).status == 200
        headers = f"traceparent: {TRACEPARENT}\r\n"
        assert (await chat(gw, body("test/gpt-fake"), headers)).status == 200
    request, (attempt,) = split(exporter.get_finished_spans())
    assert format(request.context.trace_id, "032x") == TRACE_ID
    first, second = upstream.requests
    assert "traceparent" not in first.headers  # not recorded: no trace at all
    assert traceparent_ids(second.headers["traceparent"])[1] == format(
        attempt.context.span_id, "016x"
    )


async def test_tracing_off_holds_the_no_op_and_sends_no_traceparent(
    tmp_path: Path, upstreams: tuple[FakeUpstream, FakeUpstream]
) -> None:
    upstream, _ = upstreams
    upstream.queue(Reply.json(completion("hello")))
    config = openai_connection_toml(upstream.base_url)
    async with running_gateway(tmp_path, config, env=ENV) as gw:
        assert gw.gateway.services.telemetry is NO_TELEMETRY
        assert gw.dev_key is not None
        request = post(
            "/v1/chat/completions",
            body("test/gpt-fake"),
            gw.dev_key.key,
            extra=f"traceparent: {TRACEPARENT}\r\n",
        )
        assert (await exchange(gw.host, gw.port, request)).status == 200
    (sent,) = upstream.requests
    assert "traceparent" not in sent.headers
    assert build_telemetry(None) is NO_TELEMETRY


def closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
    return port


async def test_an_unreachable_collector_slows_and_fails_nothing(tmp_path: Path) -> None:
    endpoint = f"http://127.0.0.1:{closed_port()}/v1/traces"
    config = f'[telemetry]\notlp_endpoint = "{endpoint}"\nexport_timeout = 0.5\n'
    payload = body("sluice/demo", max_tokens=3)
    began = time.monotonic()
    async with running_gateway(tmp_path, config) as gw:
        assert gw.gateway.services.telemetry is not NO_TELEMETRY
        for _ in range(5):
            started = time.monotonic()
            resp = await chat(gw, payload)
            assert resp.status == 200
            assert time.monotonic() - started < 1.0
    assert time.monotonic() - began < 10.0  # the shutdown gives up within the timeout


async def test_the_otlp_exporter_posts_protobuf_to_the_collector(tmp_path: Path) -> None:
    received: list[tuple[str, bytes]] = []

    async def traces(request: web.Request) -> web.Response:
        received.append((request.content_type, await request.read()))
        return web.Response(status=200, content_type="application/x-protobuf", body=b"")

    app = web.Application()
    app.router.add_post("/v1/traces", traces)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = runner.addresses[0][1]
    try:
        config = f'[telemetry]\notlp_endpoint = "http://127.0.0.1:{port}/v1/traces"\n'
        async with running_gateway(tmp_path, config) as gw:
            assert (await chat(gw, body("sluice/demo", max_tokens=3))).status == 200
    finally:
        await runner.cleanup()
    assert received and all(kind == "application/x-protobuf" for kind, _ in received)
    names = set()
    for _, data in received:
        export = ExportTraceServiceRequest.FromString(data)
        for resource in export.resource_spans:
            for scope in resource.scope_spans:
                names |= {span.name for span in scope.spans}
    assert names == {"chat sluice/demo"}


@pytest.mark.parametrize(
    ("section", "message"),
    [
        ('otlp_endpoint = "collector:4318"', "must be an http"),
        ('otlp_endpoint = "http:///v1/traces"', "must be an http"),
        ('otlp_endpoint = "http://c:4318/v1/traces"\nservice_name = " "', "service_name"),
        ('otlp_endpoint = "http://c:4318/v1/traces"\nexport_timeout = 0', "export_timeout"),
    ],
    ids=["no-scheme", "no-host", "blank-service-name", "zero-timeout"],
)
def test_a_bad_telemetry_section_is_a_config_error(
    tmp_path: Path, section: str, message: str
) -> None:
    with pytest.raises(ConfigError, match=message):
        build_settings(parse_config(f"[telemetry]\n{section}\n"), {}, tmp_path)


def test_the_section_resolves_with_defaults(tmp_path: Path) -> None:
    text = '[telemetry]\notlp_endpoint = "http://c:4318/v1/traces"\n'
    assert build_settings(parse_config(text), {}, tmp_path).telemetry == TelemetrySettings(
        "http://c:4318/v1/traces", "sluice", 10.0
    )
    assert build_settings(parse_config(""), {}, tmp_path).telemetry is None


def test_without_the_extra_startup_names_it(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delitem(sys.modules, "sluice.exchange.otel", raising=False)
    monkeypatch.setitem(sys.modules, "opentelemetry.sdk.trace", None)
    settings = TelemetrySettings("http://c:4318/v1/traces")
    with pytest.raises(ConfigError, match=r"pip install 'sluice-gateway\[telemetry\]'"):
        build_telemetry(settings)


async def test_the_composition_root_refuses_it_too(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    settings = build_settings(parse_config(TELEMETRY), {}, tmp_path)
    store = await open_store(settings.storage_url)
    monkeypatch.delitem(sys.modules, "sluice.exchange.otel", raising=False)
    monkeypatch.setitem(sys.modules, "opentelemetry.exporter.otlp.proto.http.trace_exporter", None)
    try:
        with pytest.raises(ConfigError, match="telemetry"):
            create_app(settings, store)
    finally:
        await store.close()


def test_a_reload_holds_a_telemetry_change_for_a_restart(tmp_path: Path) -> None:
    def settings(text: str) -> Settings:
        return build_settings(parse_config(text), {}, tmp_path)

    other = '[telemetry]\notlp_endpoint = "http://other:4318/v1/traces"\n'
    applied, held = effective(settings(TELEMETRY), settings(other))
    assert held == ("[telemetry] otlp_endpoint",)
    assert applied.telemetry == settings(TELEMETRY).telemetry
    assert effective(settings(""), settings(TELEMETRY))[1] == ("telemetry",)
