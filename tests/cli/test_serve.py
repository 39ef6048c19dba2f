"""``sluice serve`` as a user runs it: a real process, real port, real files."""

from __future__ import annotations

import asyncio
import json
import os
import re
import signal
import stat
import subprocess
import sys
import threading
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from click.testing import CliRunner

from sluice.cli.main import main
from tests.support.databases import fresh_postgres

BANNER = re.compile(r"listening on (http://127\.0\.0\.1:\d+)")


@contextmanager
def serving(
    home: Path, *args: str, env_extra: dict[str, str] | None = None
) -> Iterator[tuple[str, str]]:
    env = {**os.environ, "SLUICE_HOME": str(home), "PYTHONUNBUFFERED": "1"}
    for name in ("OPENAI_API_KEY", "DEEPSEEK_API_KEY", "SLUICE_ADMIN_KEY"):
        env.pop(name, None)
    env |= env_extra or {}
    proc = subprocess.Popen(
        [sys.executable, "-m", "sluice", "serve", "--port", "0", *args],
        stderr=subprocess.PIPE,
        stdout=subprocess.DEVNULL,
        text=True,
        env=env,
    )
    assert proc.stderr is not None
    lines = []
    try:
        for line in proc.stderr:
            lines.append(line)
            if line.startswith("Press Ctrl-C to stop."):
                break
        banner = "".join(lines)
        match = BANNER.search(banner)
        assert match, banner
        drain = threading.Thread(target=proc.stderr.read, daemon=True)  # keep the pipe flowing
        drain.start()
        yield match.group(1), banner
    finally:
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=10) == 0
        proc.stderr.close()


def chat(url: str, key: str) -> bytes:
    body = json.dumps(
        {
            "model": "sluice/demo-fast",
            "stream": True,
            "max_tokens": 3,
            "messages": [{"role": "user", "content": "hi"}],
        }
    ).encode()
    req = urllib.request.Request(
        url + "/v1/chat/completions",
        body,
        method="POST",
        headers={"Authorization": f"Bearer {key}"},
    )
    with urllib.request.urlopen(req, timeout=10) as resp:
        data: bytes = resp.read()
        return data


def test_first_start_prints_and_saves_the_dev_key_then_reuses_it(tmp_path: Path) -> None:
    with serving(tmp_path) as (url, banner):
        key = (tmp_path / "dev-key").read_text().strip()
        assert key in banner and "curl -N" in banner
        assert stat.S_IMODE((tmp_path / "dev-key").stat().st_mode) == 0o600
        assert (tmp_path / "sluice.db").exists()
        body = chat(url, key)
        assert body.endswith(b"data: [DONE]\n\n") and b'"finish_reason":"length"' in body
    with serving(tmp_path) as (url, banner):
        assert key not in banner and "dev key:     in" in banner
        assert chat(url, key).endswith(b"data: [DONE]\n\n")


def test_the_banner_says_where_the_console_is_and_whether_the_admin_api_is_on(
    tmp_path: Path,
) -> None:
    admin = "admin-" + "z" * 40
    with serving(tmp_path / "off") as (url, off):
        assert f"console:     {url}/" in off
        assert "  development: dev key on, demo on\n" in off  # SQLite: both on by default
        assert "admin API:   off (set SLUICE_ADMIN_KEY to a key of 32+ characters)" in off
    with serving(tmp_path / "on", env_extra={"SLUICE_ADMIN_KEY": admin}) as (_, on):
        assert "admin API:   on (the key in SLUICE_ADMIN_KEY)" in on and admin not in on


def test_two_gateways_side_by_side(tmp_path: Path) -> None:
    with serving(tmp_path / "a") as (url_a, _), serving(tmp_path / "b") as (url_b, _):
        key_a = (tmp_path / "a" / "dev-key").read_text().strip()
        key_b = (tmp_path / "b" / "dev-key").read_text().strip()
        assert url_a != url_b and key_a != key_b
        assert chat(url_a, key_a).endswith(b"[DONE]\n\n")
        assert chat(url_b, key_b).endswith(b"[DONE]\n\n")


def test_config_can_turn_the_dev_key_off(tmp_path: Path) -> None:
    config = tmp_path / "sluice.toml"
    config.write_text("[server]\ndev_key = false\n")
    with serving(tmp_path, "--config", str(config)) as (_, banner):
        assert "  development: dev key off, demo on\n" in banner
        assert "dev key:" not in banner and "curl" not in banner
    assert not (tmp_path / "dev-key").exists()


def banner_of(home: Path, *args: str) -> str:
    with serving(home, *args) as (_, banner):
        return banner


async def test_on_postgres_the_banner_says_what_is_off_and_what_turns_it_on(
    tmp_path: Path,
) -> None:
    config = tmp_path / "sluice.toml"
    async with fresh_postgres() as dsn:
        config.write_text(f'[storage]\nurl = "{dsn}"\n')
        neither = await asyncio.to_thread(banner_of, tmp_path, "--config", str(config))
        minted = (tmp_path / "dev-key").exists()
        config.write_text(f'[storage]\nurl = "{dsn}"\n[server]\ndev_key = true\n')
        dev_only = await asyncio.to_thread(banner_of, tmp_path, "--config", str(config))
    assert (
        "  development: dev key off, demo off (shared storage: [server] dev_key = true / "
        "demo = true turns them on)\n"
    ) in neither
    assert "connection:" not in neither and "dev key:" not in neither and not minted
    assert (
        "  development: dev key on, demo off (shared storage: [server] demo = true turns it on)\n"
    ) in dev_only
    assert "dev key:" in dev_only and "curl" not in dev_only  # no demo to try it on


def test_help_explains_every_flag() -> None:
    runner = CliRunner()
    top = runner.invoke(main, ["--help"])
    assert top.exit_code == 0 and "serve" in top.output
    serve = runner.invoke(main, ["serve", "--help"])
    assert serve.exit_code == 0
    for flag in ("--config", "--host", "--port", "--home", "--log-level"):
        assert flag in serve.output


def test_bad_config_exits_with_a_clear_message(tmp_path: Path) -> None:
    config = tmp_path / "bad.toml"
    config.write_text("[server]\nport = 'x'\n")
    result = CliRunner().invoke(main, ["serve", "--config", str(config)])
    assert result.exit_code == 1
    assert "Expected `int`, got `str` - at `$.server.port`" in result.output
    assert "Traceback" not in result.output


def test_debug_logs_sluice_only_not_the_libraries_that_log_credentials() -> None:
    """botocore's debug output quotes the headers it signs (a session token among them):
    ``--log-level DEBUG`` is Sluice's own verbosity, libraries stay at warnings."""
    code = (
        "import logging; from sluice.cli.serve import configure_logging; "
        "configure_logging('DEBUG'); "
        "print(logging.getLogger('sluice.server').isEnabledFor(logging.DEBUG), "
        "logging.getLogger('botocore.auth').isEnabledFor(logging.DEBUG), "
        "logging.getLogger('aiohttp.client').isEnabledFor(logging.INFO), "
        "logging.getLogger('botocore').isEnabledFor(logging.WARNING))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["True", "False", "False", "True"]


async def test_the_banner_never_shows_the_storage_password(tmp_path: Path) -> None:
    config = tmp_path / "sluice.toml"
    async with fresh_postgres() as dsn:
        with_password = dsn.replace("postgresql://postgres@", "postgresql://postgres:hunter2-x@")
        assert with_password != dsn  # trust auth: the password is not checked, only shown
        config.write_text(f'[storage]\nurl = "{with_password}"\n')
        banner = await asyncio.to_thread(banner_of, tmp_path, "--config", str(config))
    assert "hunter2-x" not in banner
    assert "storage:     postgresql://postgres:***@" in banner
