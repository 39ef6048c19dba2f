from __future__ import annotations

import asyncio
import socket
from collections.abc import AsyncIterator, Sequence

import pytest

from sluice.errors import InvalidRequestError
from sluice.transport.address_policy import CODE_DENIED, CODE_INVALID, UpstreamHost, article
from sluice.transport.failures import ConnectFailedError, map_client_error
from sluice.transport.guarded_resolver import (
    AddrInfo,
    DeniedAddressError,
    allowed,
    check_base_url,
    system_resolve,
)
from sluice.transport.h1_connection import H1Connection
from sluice.transport.pool import ConnectionPool
from tests.support.fake_upstream import FakeUpstream, Reply


def row(ip: str, port: int = 80) -> AddrInfo:
    if ":" in ip:
        return (socket.AF_INET6, socket.SOCK_STREAM, 6, "", (ip, port, 0, 0))
    return (socket.AF_INET, socket.SOCK_STREAM, 6, "", (ip, port))


class FakeResolver:
    """Answers from a table; each name may answer differently on each lookup."""

    def __init__(self, answers: dict[str, list[list[str]]]) -> None:
        self.answers = answers
        self.lookups: list[str] = []

    def _next(self, host: str) -> list[str]:
        self.lookups.append(host)
        rounds = self.answers.get(host)
        if not rounds:
            raise socket.gaierror(socket.EAI_NONAME, "Name or service not known")
        return rounds.pop(0) if len(rounds) > 1 else rounds[0]

    async def addresses(self, host: str, port: int) -> list[AddrInfo]:
        """The pool's lookup."""
        return [row(ip, port) for ip in self._next(host)]

    async def resolve(self, host: str, port: int) -> list[str]:
        """The save-time check's lookup."""
        return self._next(host)


def fixed(table: dict[str, list[str]]) -> FakeResolver:
    return FakeResolver({host: [ips] for host, ips in table.items()})


@pytest.fixture
async def upstream() -> AsyncIterator[FakeUpstream]:
    server = FakeUpstream()
    server.default = Reply(200, {"content-type": "text/plain"}, b"reached")
    await server.start()
    try:
        yield server
    finally:
        await server.close()


# --- which answers may be connected to ----------------------------------------------------


def test_mixed_answer_keeps_only_public_addresses() -> None:
    answers = [row(ip) for ip in ["127.0.0.1", "8.8.8.8", "169.254.169.254", "2606:4700::1111"]]
    kept = allowed("mixed.test", answers)
    assert [a[4][0] for a in kept] == ["8.8.8.8", "2606:4700::1111"]


@pytest.mark.parametrize(
    ("ips", "reason"),
    [
        (["127.0.0.1"], "loopback"),
        (["10.0.0.7", "192.168.1.1"], "private"),
        (["169.254.169.254"], "metadata"),
        (["fe80::1%eth0"], "link-local"),
        (["::1"], "loopback"),
        (["::ffff:127.0.0.1"], "loopback"),
        (["not-an-address"], "unreadable"),
    ],
)
def test_all_denied_answer_is_refused(ips: list[str], reason: str) -> None:
    with pytest.raises(DeniedAddressError) as caught:
        allowed("inside.test", [row(ip) for ip in ips])
    assert isinstance(caught.value, OSError)
    assert caught.value.reason == reason
    assert f"resolves to {article(reason)} address" in str(caught.value)
    assert "inside.test" in str(caught.value)


# --- save time ----------------------------------------------------------------------------


async def test_save_time_accepts_a_public_name() -> None:
    resolve = fixed({"api.openai.com": ["104.18.6.192", "2606:4700::6812:6c0"]}).resolve
    target = await check_base_url("https://api.openai.com/v1", allow_private=False, resolve=resolve)
    assert target == UpstreamHost("api.openai.com", 443, None)


@pytest.mark.parametrize(
    ("ips", "reason"),
    [
        (["127.0.0.1"], "loopback"),
        (["8.8.8.8", "10.1.2.3"], "private"),  # one internal answer is enough to refuse
        (["169.254.169.254"], "metadata"),
        (["fd00:ec2::254"], "metadata"),
        (["::ffff:127.0.0.1"], "loopback"),
        (["0.0.0.0"], "unspecified"),
    ],
)
async def test_save_time_refuses_a_name_resolving_inside(ips: list[str], reason: str) -> None:
    resolve = fixed({"rebind.test": ips}).resolve
    with pytest.raises(InvalidRequestError) as caught:
        await check_base_url("http://rebind.test/v1", allow_private=False, resolve=resolve)
    assert caught.value.param == "base_url"
    assert caught.value.code == CODE_DENIED
    assert caught.value.message.startswith("base_url resolves to a")
    assert caught.value.message.endswith(f"{reason} address")


async def test_save_time_refuses_an_unresolvable_name() -> None:
    async def empty(host: str, port: int) -> Sequence[str]:
        return []

    async def hangs(host: str, port: int) -> Sequence[str]:
        await asyncio.Event().wait()
        return []

    url = "https://nowhere.test/v1"
    for resolve in (fixed({}).resolve, empty):
        with pytest.raises(InvalidRequestError, match="could not be resolved") as caught:
            await check_base_url(url, allow_private=False, resolve=resolve)
        assert caught.value.code == CODE_INVALID
    with pytest.raises(InvalidRequestError, match="could not be resolved"):
        await check_base_url(url, allow_private=False, resolve=hangs, resolve_within=0.01)


async def test_save_time_literals_and_allow_private_need_no_lookup() -> None:
    inner = fixed({"rebind.test": ["127.0.0.1"]})
    resolve = inner.resolve
    with pytest.raises(InvalidRequestError, match="points to a loopback address"):
        await check_base_url("http://0x7f.0.0.1/", allow_private=False, resolve=resolve)
    await check_base_url("http://8.8.8.8/v1", allow_private=False, resolve=resolve)
    await check_base_url("http://rebind.test:8000/v1", allow_private=True, resolve=resolve)
    assert inner.lookups == []
    with pytest.raises(InvalidRequestError, match="user name or password"):
        await check_base_url("http://a@rebind.test/", allow_private=True, resolve=resolve)


async def test_system_resolve_reads_a_numeric_host_without_dns() -> None:
    assert await system_resolve("127.0.0.1", 80) == ["127.0.0.1"]


# --- connect time, end to end on 127.0.0.1 ------------------------------------------------


async def fetch(pool: ConnectionPool, host: str, port: int) -> str:
    conn: H1Connection = await pool.open(("http", host, port))
    try:
        await conn.send(f"GET /v1/models HTTP/1.1\r\nhost: {host}\r\n\r\n".encode(), b"")
        return (await conn.read()).decode()
    finally:
        conn.close()


async def refused(pool: ConnectionPool, host: str, port: int) -> ConnectFailedError:
    with pytest.raises(ConnectFailedError) as caught:
        await fetch(pool, host, port)
    return caught.value


async def test_name_resolving_to_loopback_cannot_connect(upstream: FakeUpstream) -> None:
    resolver = fixed({"rebind.test": ["127.0.0.1"]})
    pool = ConnectionPool(guarded=True, allow_private=False, lookup=resolver.addresses)
    failure = await refused(pool, "rebind.test", upstream.port)
    assert isinstance(failure.os_error, DeniedAddressError)
    assert upstream.requests == []
    mapped = map_client_error(failure, connecting=True)
    assert (mapped.type, mapped.code) == ("upstream_error", "upstream_connect_failed")


async def test_dns_rebinding_after_save_time_check_cannot_connect(upstream: FakeUpstream) -> None:
    """The name answers a public address when saved, then loopback when connected to."""
    resolver = FakeResolver({"rebind.test": [["8.8.8.8"], ["127.0.0.1"]]})
    url = f"http://rebind.test:{upstream.port}/v1/models"
    await check_base_url(url, allow_private=False, resolve=resolver.resolve)
    pool = ConnectionPool(guarded=True, allow_private=False, lookup=resolver.addresses)
    await refused(pool, "rebind.test", upstream.port)
    assert resolver.lookups == ["rebind.test", "rebind.test"]
    assert upstream.requests == []


@pytest.mark.parametrize("host", ["127.0.0.1", "::ffff:127.0.0.1"])
async def test_ip_literal_cannot_connect(upstream: FakeUpstream, host: str) -> None:
    """A literal resolves to itself and is checked like any answer."""
    pool = ConnectionPool(guarded=True, allow_private=False)
    failure = await refused(pool, host, upstream.port)
    assert isinstance(failure.os_error, DeniedAddressError)
    assert upstream.requests == []


async def test_an_unknown_name_is_a_connect_failure() -> None:
    pool = ConnectionPool(guarded=True, allow_private=False, lookup=fixed({}).addresses)
    failure = await refused(pool, "nowhere.test", 80)
    assert isinstance(failure.os_error, socket.gaierror)


async def test_allow_private_connects(upstream: FakeUpstream) -> None:
    resolver = fixed({"rebind.test": ["127.0.0.1"]})
    pool = ConnectionPool(guarded=True, allow_private=True, lookup=resolver.addresses)
    assert await fetch(pool, "rebind.test", upstream.port) == "reached"
    assert [r.path for r in upstream.requests] == ["/v1/models"]


async def test_the_operators_pool_is_not_guarded(upstream: FakeUpstream) -> None:
    pool = ConnectionPool(guarded=False, allow_private=False)
    assert await fetch(pool, "127.0.0.1", upstream.port) == "reached"
