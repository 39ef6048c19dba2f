"""``sluice serve --log-format json``: one JSON object per log line; a request's access
line has what an operator filters on, and never a key or a prompt."""

from __future__ import annotations

import json
import logging
import os
import re
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import pytest

from sluice.server.logformat import JsonFormatter
from tests.support.fake_upstream import FakeUpstream, Reply
from tests.support.gateway import UPSTREAM_KEY, openai_connection_toml, running_gateway
from tests.support.raw_http import RawClient, exchange
from tests.support.raw_http import post as raw_post

CANARY_PROMPT = "canary-prompt-7f3a9c"
CANARY_KEY = "sk-canary-provider-key-00000000000000"
CONFIG = """
[[connections]]
id = "conn_dead"
provider = "openai-compatible"
base_url = "http://127.0.0.1:9/v1"
api_key_env = "CANARY_UPSTREAM_KEY"

[[models]]
id = "test/dead"
providers = { conn_dead = "dead" }
"""


def post(url: str, key: str, model: str) -> int:
    body = {
        "model": model,
        "max_tokens": 5,
        "messages": [{"role": "user", "content": CANARY_PROMPT}],
    }
    request = urllib.request.Request(
        url + "/v1/chat/completions",
        json.dumps(body).encode(),
        headers={"Authorization": f"Bearer {key}", "Content-Type": "application/json"},
    )
    try:
        with urllib.request.urlopen(request, timeout=20) as answer:
            answer.read()
            return int(answer.status)
    except urllib.error.HTTPError as err:
        return err.code


def test_json_lines_with_an_access_line_per_request(tmp_path: Path) -> None:
    (tmp_path / "sluice.toml").write_text(CONFIG)
    log = tmp_path / "log"
    env = {**os.environ, "SLUICE_HOME": str(tmp_path / "home"), "CANARY_UPSTREAM_KEY": CANARY_KEY}
    argv = [
        sys.executable,
        "-m",
        "sluice",
        "serve",
        "--port",
        "0",
        "--config",
        str(tmp_path / "sluice.toml"),
    ]
    with log.open("w") as sink:
        proc = subprocess.Popen([*argv, "--log-format", "json"], stderr=sink, env=env)
        try:
            url = None
            for _ in range(200):
                found = re.search(r"listening on (http://127\.0\.0\.1:\d+)", log.read_text())
                if found:
                    url = found[1]
                    break
                time.sleep(0.05)
            assert url is not None, log.read_text()
            key = (tmp_path / "home" / "dev-key").read_text().strip()
            statuses = [post(url, key, "sluice/demo"), post(url, key, "test/dead")]
        finally:
            proc.terminate()
            proc.wait(10)
    text = log.read_text()
    lines = [json.loads(line) for line in text.splitlines() if line.startswith("{")]
    access = [line for line in lines if line["logger"] == "sluice.access"]
    assert statuses[0] == 200 and statuses[1] >= 500
    served, failed = access
    expected: dict[str, Any] = {
        "method": "POST",
        "path": "/v1/chat/completions",
        "status": 200,
        "front_door": "chat",
        "model": "sluice/demo",
        "served_model": "sluice/demo",
        "provider": "demo",
        "outcome": "truncated",
    }
    assert {k: served[k] for k in expected} == expected
    assert served["key_prefix"] == key[: len(served["key_prefix"])] and len(
        served["key_prefix"]
    ) < len(key)
    assert served["ttft_ms"] > 0 and served["completion_tokens"] > 0 and served["cost"] is not None
    assert failed["status"] == statuses[1] and failed["outcome"] == "error" and failed["error_code"]
    assert all({"ts", "level", "logger", "message"} <= line.keys() for line in lines)
    logged = "\n".join(line for line in text.splitlines() if line.startswith("{"))
    # (the banner before the log prints the new development key once, by design)
    for secret in (CANARY_PROMPT, CANARY_KEY, key):
        assert secret not in logged


async def test_an_unreachable_upstream_is_logged_with_its_host_port_and_reason(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, "sluice.upstream")
    config = CONFIG.replace(
        'provider = "openai-compatible"',
        'provider = "openai-compatible"\ntimeouts = { connect = 2 }',
    )
    async with running_gateway(tmp_path, config, env={"CANARY_UPSTREAM_KEY": CANARY_KEY}) as gw:
        assert gw.dev_key is not None
        body = json.dumps(
            {"model": "test/dead", "messages": [{"role": "user", "content": CANARY_PROMPT}]}
        )
        answer = await exchange(
            gw.host, gw.port, raw_post("/v1/chat/completions", body.encode(), gw.dev_key.key)
        )
    lines = [r.getMessage() for r in caplog.records if r.name == "sluice.upstream"]
    assert answer.status >= 500
    assert any("upstream 127.0.0.1:9 failed: " in line and "errno" in line for line in lines), lines
    assert all(CANARY_KEY not in line and CANARY_PROMPT not in line for line in lines)
    assert all(UPSTREAM_KEY not in line for line in lines)


async def test_an_upstream_error_answer_is_logged_with_its_status_and_type(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, fake: FakeUpstream
) -> None:
    caplog.set_level(logging.WARNING, "sluice.upstream")
    quoted = f"you sent {CANARY_PROMPT} with {CANARY_KEY}"
    code = f"overloaded\nforged {UPSTREAM_KEY}"
    error = {"error": {"message": quoted, "type": "server_error", "code": code}}
    fake.queue(Reply.json(error, status=500))
    async with running_gateway(tmp_path, openai_connection_toml(fake.base_url)) as gw:
        assert gw.dev_key is not None
        body = json.dumps(
            {"model": "test/gpt-fake", "messages": [{"role": "user", "content": CANARY_PROMPT}]}
        )
        answer = await exchange(
            gw.host, gw.port, raw_post("/v1/chat/completions", body.encode(), gw.dev_key.key)
        )
    lines = [r.getMessage() for r in caplog.records if r.name == "sluice.upstream"]
    assert answer.status == 502
    port = fake.base_url.rsplit(":", 1)[1].split("/")[0]
    assert lines == [
        f"upstream 127.0.0.1:{port} answered HTTP 500 ('overloaded\\nforged [redacted]'): "
        "upstream_error upstream_http_error"
    ]
    assert all(CANARY_KEY not in line and CANARY_PROMPT not in line for line in lines)
    assert all(UPSTREAM_KEY not in line for line in lines)


@pytest.mark.parametrize(
    ("request_bytes", "status"),
    [
        (b"POST /v1/chat/completions HTTP/1.1\r\nHost: t\r\nContent-Length: x\r\n\r\n", 400),
        (b"GET /health HTTP/1.1\r\nHost: t\r\nX-Big: " + b"a" * 70_000 + b"\r\n\r\n", 431),
        (b"GET /health HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: gzip, chunked\r\n\r\n", 501),
    ],
    ids=["400-framing", "431", "501"],
)
async def test_a_request_the_http_layer_refuses_gets_an_access_line(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, request_bytes: bytes, status: int
) -> None:
    """Found by a newcomer's pass: HTTP-layer refusals (400 framing, 431, 501) left no
    access-log line."""
    caplog.set_level(logging.INFO, "sluice.access")
    async with running_gateway(tmp_path) as gw:
        client = await RawClient.connect(gw.host, gw.port)
        await client.send(request_bytes)
        answer = await client.read_response()
        await client.close()
    assert answer.status == status
    request_id = answer.headers["x-request-id"]
    (line,) = [r for r in caplog.records if r.name == "sluice.access"]
    assert line.getMessage().startswith(f"{request_id} - ")
    assert line.getMessage().endswith(f" {status}")
    fields = JsonFormatter().format(line)
    assert json.loads(fields)["status"] == status
