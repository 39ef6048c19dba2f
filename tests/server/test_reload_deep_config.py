"""A config nested 10,000 deep (issue 20): on reload it answered 500 with a traceback
(tomllib's RecursionError); it is a bad config like any other, a 422 ``invalid_config``
while the running config keeps serving, and ``sluice serve`` exits with a message."""

from __future__ import annotations

import asyncio
from pathlib import Path

from click.testing import CliRunner

from sluice.cli.main import main
from tests.support.gateway import running_gateway
from tests.support.raw_http import exchange, get

ADMIN = "admin-" + "d" * 40
DEEP = "[server]\nport = 0\ncors_origins = " + "[" * 10_000 + "]" * 10_000 + "\n"


async def test_a_config_nested_too_deeply_is_refused_and_the_old_one_serves(
    tmp_path: Path,
) -> None:
    path = tmp_path / "sluice.toml"
    async with running_gateway(
        tmp_path, "", env={"SLUICE_ADMIN_KEY": ADMIN}, config_path=path
    ) as gw:
        assert gw.dev_key is not None
        await asyncio.to_thread(path.write_text, DEEP)
        request = (
            f"POST /admin/reload HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {ADMIN}\r\n"
            "Content-Length: 0\r\n\r\n"
        )
        answer = await exchange(gw.host, gw.port, request.encode())
        models = await exchange(gw.host, gw.port, get("/v1/models", gw.dev_key.key))
    error = answer.json()["error"]
    assert answer.status == 422, answer.body[:300]
    assert error["code"] == "invalid_config" and "nested too deeply" in error["message"]
    assert "the running one is kept" in error["message"]
    assert models.status == 200


def test_serve_exits_with_a_message_not_a_traceback(tmp_path: Path) -> None:
    config = tmp_path / "deep.toml"
    config.write_text(DEEP)
    result = CliRunner().invoke(main, ["serve", "--config", str(config), "--home", str(tmp_path)])
    assert result.exit_code == 1, result.output
    assert "nested too deeply" in result.output and "Traceback" not in result.output
