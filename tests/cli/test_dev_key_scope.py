"""The development key stays on this machine (issue 20): ``sluice chat``, ``record`` and
``bench`` send it only to a gateway on a loopback address. Any other ``--url`` needs a
key given (``--api-key`` or ``SLUICE_API_KEY``), else the command stops with a usage
error before it connects. Checked from outside: a listener on this machine's own
non-loopback address records what reaches it."""

from __future__ import annotations

import asyncio
import socket
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from sluice.cli.bench import is_local_gateway
from sluice.cli.main import main

DEV_KEY = "sk-sluice-" + "D" * 40
GIVEN = "sk-given-0123456789"
COMMANDS = ("chat", "record", "bench")


def argv(command: str, home: Path) -> list[str]:
    return {
        "chat": ["chat", "--history", ""],
        "record": ["record", "-o", str(home / "out.sse")],
        "bench": ["bench", "sluice/demo", "-n", "1"],
    }[command]


def lan_address() -> str:
    """This machine's address on its default route (no packet is sent)."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
        try:
            probe.connect(("192.0.2.1", 9))
        except OSError:
            pytest.skip("no network interface besides loopback")
        address: str = probe.getsockname()[0]
    if address.startswith("127.") or address == "0.0.0.0":
        pytest.skip("no network interface besides loopback")
    return address


@asynccontextmanager
async def listener(host: str) -> AsyncIterator[tuple[str, list[bytes]]]:
    """An HTTP listener that answers every request 400 (no retry); its base URL and the
    request heads it received."""
    heads: list[bytes] = []

    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            heads.append(await reader.readuntil(b"\r\n\r\n"))
            writer.write(b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n")
            writer.write(b"Connection: close\r\n\r\n")
            await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            writer.close()

    server = await asyncio.start_server(serve, host, 0)
    port = server.sockets[0].getsockname()[1]
    try:
        yield f"http://{host}:{port}/v1", heads
    finally:
        server.close()
        await server.wait_closed()


async def run(home: Path, command: str, url: str, key: str | None = None) -> Result:
    """The command as a user runs it, its dev key in ``home``; in a thread (it runs its
    own event loop)."""
    env = {"SLUICE_HOME": str(home), "SLUICE_URL": None, "SLUICE_API_KEY": key}
    args = [*argv(command, home), "--url", url]
    return await asyncio.to_thread(CliRunner().invoke, main, args, env=env, input="hi\n")


@pytest.fixture
def home(tmp_path: Path) -> Path:
    (tmp_path / "dev-key").write_text(DEV_KEY + "\n")
    return tmp_path


@pytest.mark.parametrize("command", COMMANDS)
async def test_another_machine_gets_no_dev_key_and_the_command_says_why(
    home: Path, command: str
) -> None:
    async with listener(lan_address()) as (url, heads):
        refused = await run(home, command, url)
    assert refused.exit_code == 2, refused.output
    assert "is not a gateway on this machine" in refused.output
    assert "--api-key" in refused.output and "SLUICE_API_KEY" in refused.output
    assert "Traceback" not in refused.output and DEV_KEY not in refused.output
    assert heads == []  # nothing was sent at all


@pytest.mark.parametrize("command", COMMANDS)
async def test_another_machine_gets_the_key_given(home: Path, command: str) -> None:
    async with listener(lan_address()) as (url, heads):
        await run(home, command, url, key=GIVEN)
    assert heads and all(f"Bearer {GIVEN}".encode() in head for head in heads)
    assert not any(DEV_KEY.encode() in head for head in heads)


@pytest.mark.parametrize("command", COMMANDS)
async def test_the_local_gateway_gets_the_dev_key(home: Path, command: str) -> None:
    async with listener("127.0.0.1") as (url, heads):
        await run(home, command, url)
    assert heads and all(f"Bearer {DEV_KEY}".encode() in head for head in heads)


@pytest.mark.parametrize(
    ("url", "local"),
    [
        ("http://127.0.0.1:8787/v1", True),
        ("http://127.8.9.10/v1", True),
        ("http://localhost:8787/v1", True),
        ("HTTP://LOCALHOST/v1", True),
        ("http://[::1]:8787/v1", True),
        ("http://[::ffff:127.0.0.1]/v1", True),
        ("https://127.0.0.1/v1", True),
        ("http://127.0.0.1:8787/v1#@evil.example", True),
        ("https://api.example.com/v1", False),
        ("http://10.0.0.5:8787/v1", False),
        ("http://0.0.0.0:8787/v1", False),
        ("http://localhost.evil.example/v1", False),
        ("http://foo.localhost/v1", False),
        ("http://127.0.0.1@evil.example/v1", False),
        ("http://user@127.0.0.1/v1", False),
        ("http://127.0.0.1\\@evil.example/v1", False),
        ("ftp://127.0.0.1/v1", False),
        ("127.0.0.1:8787", False),
        ("http://[::1/v1", False),
    ],
)
def test_which_urls_are_this_machine(url: str, local: bool) -> None:
    assert is_local_gateway(url) is local
