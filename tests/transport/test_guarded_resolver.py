from __future__ import annotations

import asyncio
import socket
from collections.abc import AsyncIterator, Sequence

import aiohttp
import pytest
from aiohttp.abc import AbstractResolver, ResolveResult

from sluice.errors import InvalidRequestError
from sluice.transport.address_policy import CODE_DENIED, CODE_INVALID, UpstreamHost, article
from sluice.transport.failures import map_client_error
from sluice.transport.guarded_resolver import (
    DeniedAddressError,
    GuardedResolver,
    check_base_url,
    guarded_connector,
    guarded_socket_factory,
    resolver_lookup,
    system_resolve,
)
from tests.support.fake_upstream import FakeUpstream, Reply


class FakeResolver(AbstractResolver):
    """Answers from a table; each name may answer differently on each lookup."""

    def __init__(self, answers: dict[str, list[list[str]]]) -> None:
        self.answers = answers
        self.lookups: list[str] = []
        self.closed = False

    async def resolve(
        self, host: str, port: int = 0, family: socket.AddressFamily = socket.AF_INET
    ) -> list[ResolveResult]:
        self.lookups.append(host)
        rounds = self.answers.get(host)
        if not rounds:
            raise socket.gaierror(socket.EAI_NONAME, "Name or service not known")
        ips = rounds.pop(0) if len(rounds) > 1 else rounds[0]
        return [
            ResolveResult(
                hostname=host,
                host=ip,
                port=port,
                family=socket.AF_INET6 if ":" in ip else socket.AF_INET,
                proto=0,
                flags=socket.AI_NUMERICHOST,
            )
            for ip in ips
        ]

    async def close(self) -> None:
        self.closed = True


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


# --- the resolver wrapper ---------------------------------------------------------------


async def test_mixed_answer_keeps_only_public_addresses() -> None:
    inner = fixed({"mixed.test": ["127.0.0.1", "8.8.8.8", "169.254.169.254", "2606:4700::1111"]})
    answers = await GuardedResolver(inner).resolve("mixed.test", 443)
    assert [a["host"] for a in answers] == ["8.8.8.8", "2606:4700::1111"]


@pytest.mark.parametrize(
    ("ips", "reason"),
    [
        (["127.0.0.1"], "loopback"),
        (["10.0.0.7", "192.168.1.1"], "private"),
        (["169.254.169.254"], "metadata"),
        (["fe80::1%eth0"], "link-local"),
        (["::ffff:127.0.0.1"], "loopback"),
        (["not-an-address"], "unreadable"),
    ],
)
async def test_all_denied_answer_is_refused(ips: list[str], reason: str) -> None:
    resolver = GuardedResolver(fixed({"inside.test": ips}))
    with pytest.raises(DeniedAddressError) as caught:
        await resolver.resolve("inside.test", 80)
    assert isinstance(caught.value, OSError)
    assert caught.value.reason == reason
    assert f"resolves to {article(reason)} address" in str(caught.value)
    assert "inside.test" in str(caught.value)


async def test_allow_private_passes_every_answer() -> None:
    resolver = GuardedResolver(fixed({"lan.test": ["127.0.0.1", "10.0.0.1"]}), allow_private=True)
    answers = await resolver.resolve("lan.test", 80)
    assert [a["host"] for a in answers] == ["127.0.0.1", "10.0.0.1"]


async def test_unknown_name_error_passes_through_and_close_reaches_inner() -> None:
    inner = fixed({})
    resolver = GuardedResolver(inner)
    with pytest.raises(socket.gaierror):
        await resolver.resolve("nowhere.test", 80)
    await resolver.close()
    assert inner.closed


# --- the socket factory -------------------------------------------------------------------


@pytest.mark.parametrize(
    "addr_info",
    [
        (socket.AF_INET, socket.SOCK_STREAM, 6, "", ("127.0.0.1", 80)),
        (socket.AF_INET, socket.SOCK_STREAM, 6, "", ("169.254.169.254", 80)),
        (socket.AF_INET6, socket.SOCK_STREAM, 6, "", ("::1", 80, 0, 0)),
        (socket.AF_INET6, socket.SOCK_STREAM, 6, "", ("fe80::1%lo", 80, 0, 1)),
    ],
    ids=lambda info: str(info[4][0]),
)
def test_socket_factory_refuses_denied_addresses(
    addr_info: tuple[int, int, int, str, tuple[object, ...]],
) -> None:
    with pytest.raises(DeniedAddressError):
        guarded_socket_factory()(addr_info)
    guarded_socket_factory(allow_private=True)(addr_info).close()


def test_socket_factory_opens_public_addresses() -> None:
    sock = guarded_socket_factory()((socket.AF_INET, socket.SOCK_STREAM, 6, "", ("8.8.8.8", 443)))
    try:
        assert sock.family == socket.AF_INET
        assert sock.type == socket.SOCK_STREAM
    finally:
        sock.close()


# --- save time ----------------------------------------------------------------------------


async def test_save_time_accepts_a_public_name() -> None:
    resolve = resolver_lookup(fixed({"api.openai.com": ["104.18.6.192", "2606:4700::6812:6c0"]}))
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
    resolve = resolver_lookup(fixed({"rebind.test": ips}))
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
    for resolve in (resolver_lookup(fixed({})), empty):
        with pytest.raises(InvalidRequestError, match="could not be resolved") as caught:
            await check_base_url(url, allow_private=False, resolve=resolve)
        assert caught.value.code == CODE_INVALID
    with pytest.raises(InvalidRequestError, match="could not be resolved"):
        await check_base_url(url, allow_private=False, resolve=hangs, resolve_within=0.01)


async def test_save_time_literals_and_allow_private_need_no_lookup() -> None:
    inner = fixed({"rebind.test": ["127.0.0.1"]})
    resolve = resolver_lookup(inner)
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


async def fetch(connector: aiohttp.BaseConnector, url: str) -> str:
    async with aiohttp.ClientSession(connector=connector) as session:
        async with session.get(url, allow_redirects=False) as resp:
            return await resp.text()


async def test_name_resolving_to_loopback_cannot_connect(upstream: FakeUpstream) -> None:
    resolver = fixed({"rebind.test": ["127.0.0.1"]})
    connector = guarded_connector(resolver=resolver)
    with pytest.raises(aiohttp.ClientConnectorError) as caught:
        await fetch(connector, f"http://rebind.test:{upstream.port}/v1/models")
    assert isinstance(caught.value.os_error, DeniedAddressError)
    assert upstream.requests == []
    mapped = map_client_error(caught.value, connecting=True)
    assert (mapped.type, mapped.code) == ("upstream_error", "upstream_connect_failed")


async def test_dns_rebinding_after_save_time_check_cannot_connect(upstream: FakeUpstream) -> None:
    """The name answers a public address when saved, then loopback when connected to."""
    resolver = FakeResolver({"rebind.test": [["8.8.8.8"], ["127.0.0.1"]]})
    url = f"http://rebind.test:{upstream.port}/v1/models"
    await check_base_url(url, allow_private=False, resolve=resolver_lookup(resolver))
    with pytest.raises(aiohttp.ClientConnectorError):
        await fetch(guarded_connector(resolver=resolver), url)
    assert resolver.lookups == ["rebind.test", "rebind.test"]
    assert upstream.requests == []


@pytest.mark.parametrize("host", ["127.0.0.1", "[::ffff:127.0.0.1]"])
async def test_ip_literal_cannot_connect(upstream: FakeUpstream, host: str) -> None:
    """Literals skip the resolver; the socket factory still refuses them."""
    resolver = fixed({})
    with pytest.raises(aiohttp.ClientConnectorError) as caught:
        await fetch(guarded_connector(resolver=resolver), f"http://{host}:{upstream.port}/")
    assert isinstance(caught.value.os_error, DeniedAddressError)
    assert resolver.lookups == []
    assert upstream.requests == []


async def test_allow_private_connects(upstream: FakeUpstream) -> None:
    resolver = fixed({"rebind.test": ["127.0.0.1"]})
    connector = guarded_connector(allow_private=True, resolver=resolver)
    body = await fetch(connector, f"http://rebind.test:{upstream.port}/v1/models")
    assert body == "reached"
    assert [r.path for r in upstream.requests] == ["/v1/models"]
