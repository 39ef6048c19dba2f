"""Who may read ``/metrics``: the admin key on the main listener, anyone on the
``[server] metrics_listen`` scrape listener (which serves nothing else)."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest

from sluice.config import listen_address, parse_config
from sluice.errors import ConfigError
from tests.support.gateway import running_gateway
from tests.support.raw_http import RawClient, exchange, get

ADMIN = "admin-" + "k" * 40
ENV = {"SLUICE_ADMIN_KEY": ADMIN}
SCRAPE = "[server]\nport = 0\nmetrics_listen = '127.0.0.1:0'\n"


async def test_main_listener_serves_metrics_to_the_admin_key_only(tmp_path: Path) -> None:
    async with running_gateway(tmp_path, env=ENV) as gw:
        assert gw.dev_key is not None
        admin = await exchange(gw.host, gw.port, get("/metrics", ADMIN))
        api_key = await exchange(gw.host, gw.port, get("/metrics", gw.dev_key.key))
        no_key = await exchange(gw.host, gw.port, get("/metrics", None))
        wrong = await exchange(gw.host, gw.port, get("/metrics", "nope" * 10))
    assert admin.status == 200
    assert admin.headers["content-type"].startswith("text/plain; version=0.0.4")
    assert b"# TYPE sluice_requests_total counter" in admin.body
    assert api_key.status == 403
    error = api_key.json()["error"]
    assert (error["type"], error["code"]) == ("permission_error", "admin_key_required")
    assert b"sluice_" not in api_key.body
    assert no_key.status == 401 and wrong.status == 401
    assert wrong.json()["error"]["code"] == "invalid_admin_key"


async def test_without_an_admin_key_metrics_is_not_found_on_the_main_listener(
    tmp_path: Path,
) -> None:
    async with running_gateway(tmp_path) as gw:
        assert gw.dev_key is not None
        dev_key = await exchange(gw.host, gw.port, get("/metrics", gw.dev_key.key))
        no_key = await exchange(gw.host, gw.port, get("/metrics", None))
    assert dev_key.status == 404 and no_key.status == 404  # like the admin API when off
    assert b"sluice_" not in dev_key.body


async def test_metrics_listen_serves_metrics_without_a_key_and_nothing_else(
    tmp_path: Path,
) -> None:
    async with running_gateway(tmp_path, SCRAPE, env=ENV) as gw:
        assert gw.scrape is not None and gw.dev_key is not None
        host, port = gw.scrape.address
        scraped = await exchange(host, port, get("/metrics", None))
        client = await RawClient.connect(host, port)
        try:
            await client.send(b"HEAD /metrics HTTP/1.1\r\nHost: x\r\n\r\n")
            head_status, _ = await client.read_head()
            await client.send(get("/metrics", None))
            after_head = await client.read_response()  # garbled if HEAD carried a body
        finally:
            await client.close()
        post = await exchange(
            host, port, b"POST /metrics HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\n\r\n"
        )
        others = [
            await exchange(host, port, get(path, key))
            for path, key in (
                ("/v1/models", gw.dev_key.key),
                ("/admin/accounts/dev", ADMIN),
                ("/health", None),
                ("/metrics/", None),
            )
        ]
        main = await exchange(gw.host, gw.port, get("/metrics", None))
    assert scraped.status == 200 and b"# TYPE sluice_requests_total counter" in scraped.body
    assert scraped.headers["content-type"].startswith("text/plain")
    assert "x-request-id" in scraped.headers
    assert head_status == 200 and after_head.status == 200
    assert post.status == 405
    assert [r.status for r in others] == [404, 404, 404, 404]
    assert all(b'"dev"' not in r.body and b"data" not in r.body for r in others)
    assert main.status == 401  # the main listener still wants the admin key
    with pytest.raises(OSError):  # stopped with the gateway
        await exchange(host, port, get("/metrics", None))


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("127.0.0.1:9464", ("127.0.0.1", 9464)),
        ("[::1]:9464", ("::1", 9464)),
        ("metrics.internal:0", ("metrics.internal", 0)),
    ],
)
def test_listen_address_parses_host_and_port(text: str, expected: tuple[str, int]) -> None:
    assert listen_address(text) == expected


@pytest.mark.parametrize(
    ("value", "says"),
    [
        ("9464", "not host:port"),
        (":9464", "not host:port"),
        ("127.0.0.1:", "not host:port"),
        ("127.0.0.1:99999", "not host:port"),
        ("127.0.0.1:http", "not host:port"),
        ("::1:9464", "IPv6 address in brackets"),
        ("[]:9464", "not host:port"),
    ],
)
def test_a_bad_metrics_listen_is_a_config_error(value: str, says: str) -> None:
    with pytest.raises(ConfigError, match=says) as caught:
        parse_config(f"[server]\nmetrics_listen = '{value}'\n", "sluice.toml")
    assert "sluice.toml" in str(caught.value) and "metrics_listen" in str(caught.value)


async def test_a_metrics_listen_address_in_use_stops_the_start(tmp_path: Path) -> None:
    taken = socket.socket()
    taken.bind(("127.0.0.1", 0))
    taken.listen()
    try:
        port = taken.getsockname()[1]
        config = f"[server]\nport = 0\nmetrics_listen = '127.0.0.1:{port}'\n"
        with pytest.raises(OSError):
            async with running_gateway(tmp_path, config):
                pass
    finally:
        taken.close()
