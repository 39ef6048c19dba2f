"""HTTPS served by the gateway itself (``[server] tls_cert`` / ``tls_key``), with a
certificate authority made in the test (trustme)."""

from __future__ import annotations

import asyncio
import json
import logging
import ssl
from pathlib import Path

import pytest
import trustme
from click.testing import CliRunner
from openai import AsyncOpenAI, DefaultAsyncHttpxClient

from sluice.cli.main import main
from sluice.config import ServerConfig, parse_config
from sluice.errors import ConfigError
from sluice.server.lifecycle import RunningGateway
from sluice.server.tls import server_tls
from tests.support.fake_openai import DONE, chunk, text_stream
from tests.support.fake_upstream import FakeUpstream, Pause, Reply, Step, WaitFor
from tests.support.gateway import openai_connection_toml, running_gateway
from tests.support.raw_http import RawClient, post

USAGE = {"prompt_tokens": 10, "completion_tokens": 2, "total_tokens": 12}
BODY = json.dumps(
    {"model": "test/gpt-fake", "stream": True, "messages": [{"role": "user", "content": "hi"}]}
).encode()


class Certs:
    """A CA, a server certificate for 127.0.0.1 and its key, written under ``root``."""

    def __init__(self, root: Path) -> None:
        self.ca = trustme.CA()
        issued = self.ca.issue_cert("127.0.0.1", "localhost")
        self.cert = root / "cert.pem"
        self.key = root / "key.pem"
        issued.private_key_pem.write_to_path(self.key)
        self.cert.write_bytes(b"".join(pem.bytes() for pem in issued.cert_chain_pems))

    def server_toml(self, extra: str = "") -> str:
        return f'[server]\nport = 0\ntls_cert = "{self.cert}"\ntls_key = "{self.key}"\n{extra}'

    def client_context(self) -> ssl.SSLContext:
        context = ssl.create_default_context()
        self.ca.configure_trust(context)
        return context


@pytest.fixture
def certs(tmp_path: Path) -> Certs:
    return Certs(tmp_path)


def sdk(gw: RunningGateway, certs: Certs) -> AsyncOpenAI:
    assert gw.dev_key is not None
    http = DefaultAsyncHttpxClient(verify=certs.client_context())
    return AsyncOpenAI(
        base_url=gw.base_url + "/v1", api_key=gw.dev_key.key, max_retries=0, http_client=http
    )


async def tls_client(gw: RunningGateway, context: ssl.SSLContext) -> RawClient:
    reader, writer = await asyncio.open_connection(
        gw.host, gw.port, ssl=context, server_hostname="127.0.0.1"
    )
    return RawClient(reader, writer)


async def read_until(client: RawClient, marker: bytes) -> bytes:
    """Read a streamed response's head, then its chunks until ``marker`` has arrived."""
    status, _ = await client.read_head()
    assert status == 200
    seen = b""
    while marker not in seen:
        piece = await client.read_chunk()
        assert piece is not None
        seen += piece
    return seen


async def test_the_openai_sdk_streams_over_https(
    tmp_path: Path, certs: Certs, fake: FakeUpstream
) -> None:
    fake.queue(Reply.stream(*text_stream("Hello", " world", usage=USAGE)))
    config = certs.server_toml() + openai_connection_toml(fake.base_url)
    async with running_gateway(tmp_path / "home", config) as gw:
        assert gw.base_url.startswith("https://127.0.0.1:")
        async with sdk(gw, certs) as client:
            stream = await client.chat.completions.create(
                model="test/gpt-fake",
                messages=[{"role": "user", "content": "hi"}],
                stream=True,
                stream_options={"include_usage": True},
            )
            chunks = [c async for c in stream]
    assert "".join(c.choices[0].delta.content or "" for c in chunks if c.choices) == "Hello world"
    usage = chunks[-1].usage
    assert usage is not None and (usage.prompt_tokens, usage.completion_tokens) == (10, 2)


async def test_tls_1_2_or_later_and_http_1_1_only(tmp_path: Path, certs: Certs) -> None:
    context = server_tls(ServerConfig(tls_cert=str(certs.cert), tls_key=str(certs.key)))
    assert context is not None and context.minimum_version == ssl.TLSVersion.TLSv1_2
    async with running_gateway(tmp_path / "home", certs.server_toml()) as gw:
        offer = certs.client_context()
        offer.set_alpn_protocols(["h2", "http/1.1"])
        client = await tls_client(gw, offer)
        tls = client.writer.get_extra_info("ssl_object")
        assert tls.selected_alpn_protocol() == "http/1.1"
        assert tls.version() in {"TLSv1.2", "TLSv1.3"}
        await client.close()


async def test_chunks_are_flushed_one_by_one_over_tls(
    tmp_path: Path, certs: Certs, fake: FakeUpstream
) -> None:
    release = asyncio.Event()
    steps: list[Step] = [chunk(role="assistant", content=""), chunk(content="first")]
    fake.queue(
        Reply.stream(*steps, WaitFor(release), chunk(content="second"), chunk(finish="stop"), DONE)
    )
    config = certs.server_toml("sse_keepalive_interval = 0\n") + openai_connection_toml(
        fake.base_url
    )
    async with running_gateway(tmp_path / "home", config) as gw:
        assert gw.dev_key is not None
        client = await tls_client(gw, certs.client_context())
        await client.send(post("/v1/chat/completions", BODY, gw.dev_key.key))
        async with asyncio.timeout(5):  # the upstream is still waiting: nothing is buffered
            seen = await read_until(client, b'"content":"first"')
        assert b"second" not in seen
        release.set()
        rest = b""
        while (piece := await client.read_chunk()) is not None:
            rest += piece
        await client.close()
    assert b'"content":"second"' in rest and rest.endswith(DONE)


async def test_a_client_leaving_over_tls_cancels_the_upstream(
    tmp_path: Path, certs: Certs, fake: FakeUpstream
) -> None:
    steps: list[Step] = [chunk(role="assistant", content="")]
    for i in range(200):
        steps += [chunk(content=f"token{i} "), Pause(0.05)]
    fake.queue(Reply.stream(*steps))
    config = certs.server_toml("sse_keepalive_interval = 0\n") + openai_connection_toml(
        fake.base_url
    )
    async with running_gateway(tmp_path / "home", config) as gw:
        assert gw.dev_key is not None
        client = await tls_client(gw, certs.client_context())
        await client.send(post("/v1/chat/completions", BODY, gw.dev_key.key))
        await read_until(client, b"token0")
        client.writer.transport.abort()  # the client is gone, mid-stream
        await asyncio.wait_for(fake.hung_up.wait(), 5)


async def test_plain_http_to_the_tls_port_is_dropped_quietly(
    tmp_path: Path, certs: Certs, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG, "asyncio")
    async with running_gateway(tmp_path / "home", certs.server_toml()) as gw:
        plain = await RawClient.connect(gw.host, gw.port)
        await plain.send(b"GET /v1/models HTTP/1.1\r\nHost: gateway.test\r\n\r\n")
        try:
            async with asyncio.timeout(5):
                answer = await plain.reader.read()
        except ConnectionResetError:
            answer = b""
        assert b"HTTP/1.1" not in answer  # no plaintext answer, the connection just ends
        await plain.close()
        # the listener is unharmed: the next HTTPS client is served
        client = await tls_client(gw, certs.client_context())
        await client.send(b"GET /v1/models HTTP/1.1\r\nHost: gateway.test\r\n\r\n")
        status, _ = await client.read_head()
        assert status == 401
        await client.close()
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR]


async def test_a_client_that_never_handshakes_is_cut_after_header_timeout(
    tmp_path: Path, certs: Certs
) -> None:
    async with running_gateway(
        tmp_path / "home", certs.server_toml("header_timeout = 0.3\n")
    ) as gw:
        idle = await RawClient.connect(gw.host, gw.port)
        assert await idle.at_eof(wait=3)
        await idle.close()


def test_half_a_tls_config_names_the_missing_key() -> None:
    with pytest.raises(ConfigError, match="`tls_cert` is set but `tls_key` is not"):
        parse_config('[server]\ntls_cert = "cert.pem"\n')
    with pytest.raises(ConfigError, match="`tls_key` is set but `tls_cert` is not"):
        parse_config('[server]\ntls_key = "key.pem"\n')


def _other_key(root: Path) -> Path:
    path = root / "other-key.pem"
    trustme.CA().issue_cert("127.0.0.1").private_key_pem.write_to_path(path)
    return path


@pytest.mark.parametrize(
    ("case", "message"),
    [
        ("mismatched", r"tls_key: .*other-key\.pem is not the key of the certificate"),
        ("garbage_cert", r"tls_cert: .*junk\.pem holds no PEM certificate"),
        ("garbage_key", r"tls_key: .*junk\.pem holds no usable PEM private key"),
        ("missing_cert", r"tls_cert: cannot read .*absent\.pem: No such file"),
    ],
)
async def test_a_bad_certificate_or_key_fails_at_startup(
    tmp_path: Path, certs: Certs, case: str, message: str
) -> None:
    junk = tmp_path / "junk.pem"
    junk.write_text("not a PEM file\n")
    cert, key = {
        "mismatched": (certs.cert, _other_key(tmp_path)),
        "garbage_cert": (junk, certs.key),
        "garbage_key": (certs.cert, junk),
        "missing_cert": (tmp_path / "absent.pem", certs.key),
    }[case]
    config = f'[server]\nport = 0\ntls_cert = "{cert}"\ntls_key = "{key}"\n'
    with pytest.raises(ConfigError, match=message):
        async with running_gateway(tmp_path / "home", config):
            pass
    assert not (tmp_path / "home").exists()  # refused before anything was opened


def test_sluice_serve_reports_a_bad_pair_without_a_traceback(tmp_path: Path, certs: Certs) -> None:
    config = tmp_path / "sluice.toml"
    config.write_text(
        f'[server]\nport = 0\ntls_cert = "{certs.cert}"\ntls_key = "{_other_key(tmp_path)}"\n'
    )
    result = CliRunner().invoke(
        main, ["serve", "--config", str(config)], env={"SLUICE_HOME": str(tmp_path / "home")}
    )
    assert result.exit_code == 1
    assert "Error: [server] tls_key:" in result.output
    assert "is not the key of the certificate" in result.output
    assert "Traceback" not in result.output
