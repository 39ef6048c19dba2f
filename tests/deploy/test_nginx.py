"""deploy/nginx/sluice.conf, run by the real nginx in front of a real gateway: TLS ends
at nginx, and streams still arrive event by event, with usage, and a client leaving
still cancels the upstream call.

nginx absent: these tests skip, except under ``CI=true``, where they fail (``make test``
installs it: scripts/deps.sh).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import shutil
import signal
import socket
import ssl
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import pytest
import trustme
from openai import AsyncOpenAI, DefaultAsyncHttpxClient

from sluice.server.lifecycle import RunningGateway
from tests.support.fake_openai import DONE, chunk, text_stream
from tests.support.fake_upstream import FakeUpstream, Pause, Reply, Step, WaitFor
from tests.support.gateway import openai_connection_toml, running_gateway
from tests.support.raw_http import RawClient, post

CONF = Path(__file__).parents[2] / "deploy" / "nginx" / "sluice.conf"
SERVER = "[server]\nport = 0\nsse_keepalive_interval = 0\n"
GZIP = "Accept-Encoding: gzip\r\n"
USAGE = {"prompt_tokens": 10, "completion_tokens": 2, "total_tokens": 12}
BODY = json.dumps(
    {"model": "test/gpt-fake", "stream": True, "messages": [{"role": "user", "content": "hi"}]}
).encode()
# Around the deployed file, what a distribution's nginx.conf would hold, in the temp
# dir; gzip on for event streams too, which the deployed file must turn off. The
# gateway's ``X-Accel-Buffering: no`` is ignored, so that the file's own
# ``proxy_buffering off`` is what is tested.
MAIN = """
pid {root}/nginx.pid;
error_log {root}/error.log info;
worker_processes 1;
events {{ worker_connections 128; }}
http {{
    access_log {root}/access.log;
    client_body_temp_path {root}/body;
    proxy_temp_path {root}/proxy;
    fastcgi_temp_path {root}/fastcgi;
    uwsgi_temp_path {root}/uwsgi;
    scgi_temp_path {root}/scgi;
    gzip on;
    gzip_min_length 1;
    gzip_types text/event-stream application/json;
    proxy_ignore_headers X-Accel-Buffering;
    include {root}/sluice.conf;
}}
"""


def nginx_binary() -> str:
    found = shutil.which("nginx") or shutil.which("nginx", path="/usr/sbin:/usr/local/sbin")
    if found is None:
        message = "nginx is not installed (make test installs it: scripts/deps.sh)"
        if os.environ.get("CI") == "true":
            pytest.fail(message + " — CI=true requires it")
        pytest.skip(message)
    return found


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def render(conf: str, *, gateway_port: int, port: int, cert: Path, key: Path) -> str:
    """The deployed file with this test's addresses and certificate; each replaced line
    must be there exactly once, so the file and the test cannot drift apart."""
    for old, new in (
        ("server 127.0.0.1:8787;", f"server 127.0.0.1:{gateway_port};"),
        ("listen 443 ssl;", f"listen 127.0.0.1:{port} ssl;"),
        ("/etc/ssl/sluice/fullchain.pem;", f"{cert};"),
        ("/etc/ssl/sluice/privkey.pem;", f"{key};"),
    ):
        assert conf.count(old) == 1, old
        conf = conf.replace(old, new)
    return conf


class Proxy:
    def __init__(self, port: int, ca: trustme.CA) -> None:
        self.port = port
        self.base_url = f"https://127.0.0.1:{port}"
        self.ca = ca

    def tls(self) -> ssl.SSLContext:
        context = ssl.create_default_context()
        self.ca.configure_trust(context)
        return context

    async def client(self) -> RawClient:
        reader, writer = await asyncio.open_connection("127.0.0.1", self.port, ssl=self.tls())
        return RawClient(reader, writer)


def prepare(root: Path, gateway_port: int) -> Proxy:
    """A CA and a certificate for 127.0.0.1, the rendered site file and its nginx.conf."""
    ca = trustme.CA()
    issued = ca.issue_cert("127.0.0.1")
    cert, key = root / "cert.pem", root / "key.pem"
    cert.write_bytes(b"".join(pem.bytes() for pem in issued.cert_chain_pems))
    issued.private_key_pem.write_to_path(key)
    port = free_port()
    site = render(CONF.read_text(), gateway_port=gateway_port, port=port, cert=cert, key=key)
    (root / "sluice.conf").write_text(site)
    (root / "nginx.conf").write_text(MAIN.format(root=root))
    return Proxy(port, ca)


def error_log(root: Path) -> str:
    path = root / "error.log"
    return path.read_text() if path.exists() else ""


async def wait_listening(port: int, proc: asyncio.subprocess.Process, root: Path) -> None:
    for _ in range(200):
        if proc.returncode is not None:
            break
        with contextlib.suppress(OSError):
            _, writer = await asyncio.open_connection("127.0.0.1", port)
            writer.close()
            return
        await asyncio.sleep(0.05)
    raise AssertionError(f"nginx did not start (exit {proc.returncode}): {error_log(root)}")


@asynccontextmanager
async def nginx_in_front(root: Path, gw: RunningGateway) -> AsyncIterator[Proxy]:
    binary = nginx_binary()
    proxy = prepare(root, gw.port)
    proc = await asyncio.create_subprocess_exec(
        binary,
        "-p",
        str(root),
        "-c",
        str(root / "nginx.conf"),
        "-g",
        "daemon off;",
        stdout=asyncio.subprocess.DEVNULL,
        stderr=asyncio.subprocess.DEVNULL,
    )
    try:
        await wait_listening(proxy.port, proc, root)
        yield proxy
    finally:
        if proc.returncode is None:
            proc.send_signal(signal.SIGTERM)
        try:
            await asyncio.wait_for(proc.wait(), 10)
        except TimeoutError:
            proc.kill()
            await proc.wait()


async def read_until(client: RawClient, marker: bytes) -> tuple[dict[str, str], bytes]:
    status, headers = await client.read_head()
    assert status == 200
    seen = b""
    while marker not in seen:
        piece = await client.read_chunk()
        assert piece is not None, seen
        seen += piece
    return headers, seen


async def test_events_pass_nginx_one_by_one(tmp_path: Path, fake: FakeUpstream) -> None:
    release = asyncio.Event()
    steps: list[Step] = [chunk(role="assistant", content=""), chunk(content="first")]
    fake.queue(
        Reply.stream(*steps, WaitFor(release), chunk(content="second"), chunk(finish="stop"), DONE)
    )
    config = SERVER + openai_connection_toml(fake.base_url)
    async with (
        running_gateway(tmp_path / "home", config) as gw,
        nginx_in_front(tmp_path, gw) as proxy,
    ):
        assert gw.dev_key is not None
        client = await proxy.client()
        await client.send(post("/v1/chat/completions", BODY, gw.dev_key.key, extra=GZIP))
        async with asyncio.timeout(5):  # the upstream still holds the rest: not buffered
            headers, seen = await read_until(client, b'"content":"first"')
        assert b"second" not in seen
        assert "content-encoding" not in headers  # gzip off, even where nginx.conf has it
        assert headers["content-type"].startswith("text/event-stream")
        release.set()
        rest = b""
        while (piece := await client.read_chunk()) is not None:
            rest += piece
        await client.close()
    assert b'"content":"second"' in rest and rest.endswith(DONE)


async def test_the_openai_sdk_streams_with_usage_through_nginx(
    tmp_path: Path, fake: FakeUpstream
) -> None:
    fake.queue(Reply.stream(*text_stream("Hello", " world", usage=USAGE)))
    config = SERVER + openai_connection_toml(fake.base_url)
    async with (
        running_gateway(tmp_path / "home", config) as gw,
        nginx_in_front(tmp_path, gw) as proxy,
    ):
        assert gw.dev_key is not None
        http = DefaultAsyncHttpxClient(verify=proxy.tls())
        async with AsyncOpenAI(
            base_url=proxy.base_url + "/v1", api_key=gw.dev_key.key, max_retries=0, http_client=http
        ) as sdk:
            stream = await sdk.chat.completions.create(
                model="test/gpt-fake",
                messages=[{"role": "user", "content": "hi"}],
                stream=True,
                stream_options={"include_usage": True},
            )
            chunks = [c async for c in stream]
    assert "".join(c.choices[0].delta.content or "" for c in chunks if c.choices) == "Hello world"
    usage = chunks[-1].usage
    assert usage is not None and (usage.prompt_tokens, usage.completion_tokens) == (10, 2)
    assert fake.requests[0].headers["authorization"] != f"Bearer {gw.dev_key.key}"


async def test_a_client_leaving_nginx_cancels_the_upstream(
    tmp_path: Path, fake: FakeUpstream
) -> None:
    steps: list[Step] = [chunk(role="assistant", content="")]
    for i in range(200):
        steps += [chunk(content=f"token{i} "), Pause(0.05)]
    fake.queue(Reply.stream(*steps))
    config = SERVER + openai_connection_toml(fake.base_url)
    async with (
        running_gateway(tmp_path / "home", config) as gw,
        nginx_in_front(tmp_path, gw) as proxy,
    ):
        assert gw.dev_key is not None
        client = await proxy.client()
        await client.send(post("/v1/chat/completions", BODY, gw.dev_key.key))
        await read_until(client, b"token0")
        client.writer.transport.abort()  # the client is gone, mid-stream
        await asyncio.wait_for(fake.hung_up.wait(), 5)
    assert fake.closed_streams == 0  # the upstream never got to finish


def test_missing_nginx_skips_but_fails_under_ci(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(shutil, "which", lambda *_, **__: None)
    monkeypatch.delenv("CI", raising=False)
    with pytest.raises(pytest.skip.Exception, match="nginx is not installed"):
        nginx_binary()
    monkeypatch.setenv("CI", "true")
    with pytest.raises(pytest.fail.Exception, match="CI=true requires it"):
        nginx_binary()
