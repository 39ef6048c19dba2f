"""``sluice reload`` against a running gateway process (issue 12)."""

from __future__ import annotations

import asyncio
import json
import socket
from pathlib import Path

import click
import pytest
from click.testing import CliRunner, Result

from sluice.cli.main import main
from sluice.cli.reload import gateway_url
from sluice.config import ServerConfig
from tests.support.process import GatewayProcess, gateway_process

ADMIN = "admin-" + "c" * 40
QUIET = "[server]\nenv_connections = false\n"  # whatever provider keys this shell holds
DEMO_ROUTE = QUIET + '\n[[routes]]\nname = "fast"\nchain = [ { model = "sluice/demo-fast" } ]\n'


async def sluice_reload(*args: str, env: dict[str, str | None] | None = None) -> Result:
    environ: dict[str, str | None] = {"SLUICE_ADMIN_KEY": ADMIN, "SLUICE_URL": None, **(env or {})}
    return await asyncio.to_thread(CliRunner().invoke, main, ["reload", *args], env=environ)


def url(gw: GatewayProcess) -> str:
    return f"http://{gw.host}:{gw.port}"


async def test_sluice_reload_applies_the_file_and_reports_what_changed(tmp_path: Path) -> None:
    async with gateway_process(tmp_path, QUIET, env={"SLUICE_ADMIN_KEY": ADMIN}) as gw:
        unchanged = await sluice_reload("--url", url(gw))
        await asyncio.to_thread(gw.config.write_text, DEMO_ROUTE)
        changed = await sluice_reload("--url", url(gw) + "/v1", "--json")
        await asyncio.to_thread(gw.config.write_text, DEMO_ROUTE + "[[routes]]\nname = 'x'\n")
        refused = await sluice_reload("--url", url(gw))
        wrong_key = await sluice_reload("--url", url(gw), env={"SLUICE_ADMIN_KEY": "no" * 20})
    assert unchanged.exit_code == 0, unchanged.output
    assert unchanged.output.startswith("Reloaded: nothing changed.\n")
    assert "connections: conn_demo" in unchanged.output
    assert changed.exit_code == 0, changed.output
    doc = json.loads(changed.output)
    assert (doc["changed"], doc["routes"]) == (["routes"], ["fast"])
    assert refused.exit_code == 1
    assert "answered 422: The config was not reloaded (the running one is kept)" in refused.output
    assert "missing required field `chain`" in refused.output
    assert wrong_key.exit_code == 1 and "answered 401: Invalid admin key." in wrong_key.output


async def test_sluice_reload_needs_the_admin_key_and_a_gateway(tmp_path: Path) -> None:
    config = tmp_path / "sluice.toml"
    await asyncio.to_thread(config.write_text, "[server]\nadmin_key_env = 'MY_ADMIN'\n")
    no_key = await sluice_reload("--config", str(config), env={"MY_ADMIN": None})
    with socket.socket() as sock:  # a port nothing listens on
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    nobody = await sluice_reload("--url", f"http://127.0.0.1:{port}")
    assert no_key.exit_code == 2 and "set MY_ADMIN to the gateway's admin key" in no_key.output
    assert nobody.exit_code == 1
    assert f"no gateway answered at http://127.0.0.1:{port}" in nobody.output


@pytest.mark.parametrize(
    ("server", "expected"),
    [
        (ServerConfig(), "http://127.0.0.1:8787"),
        (ServerConfig(host="0.0.0.0", port=9000), "http://127.0.0.1:9000"),
        (ServerConfig(host="::", port=9000), "http://[::1]:9000"),
        (ServerConfig(host="10.1.2.3", tls_cert="c", tls_key="k"), "https://10.1.2.3:8787"),
    ],
    ids=["default", "any-ipv4", "any-ipv6", "tls"],
)
def test_the_gateway_url_comes_from_the_config_server_table(
    server: ServerConfig, expected: str
) -> None:
    assert gateway_url(server) == expected


def test_a_config_on_any_free_port_needs_an_url() -> None:
    with pytest.raises(click.UsageError, match="give --url"):
        gateway_url(ServerConfig(port=0))


@pytest.mark.parametrize("url", ["http://127.0.0.1:99999", "http://[::1", "ftp://x", "http://"])
def test_a_malformed_url_is_a_usage_error_not_a_traceback(url: str) -> None:
    result = CliRunner().invoke(main, ["reload", "--url", url], env={"SLUICE_ADMIN_KEY": "k" * 40})
    assert result.exit_code == 2 and "must be an http(s) URL" in result.output, result.output
