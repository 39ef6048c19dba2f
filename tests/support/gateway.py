"""Start a real gateway (real sockets, real SQLite) for a test."""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path

from sluice.config import parse_config
from sluice.server.lifecycle import RunningGateway, start_gateway, stop_gateway
from sluice.server.reload import SettingsSource
from sluice.settings import build_settings

FIXED_TIME = 1787481600


def counting_ids() -> Callable[[str], str]:
    """Deterministic ids: ``req_000001``, ``call_000002``, …"""
    counter = itertools.count(1)
    return lambda prefix: f"{prefix}_{next(counter):06d}"


def openai_connection_toml(base_url: str, *, conn_id: str = "conn_fake", timeouts: str = "") -> str:
    extra = f"\ntimeouts = {{ {timeouts} }}" if timeouts else ""
    return f"""
[[connections]]
id = "{conn_id}"
provider = "openai-compatible"
base_url = "{base_url}"
api_key_env = "FAKE_UPSTREAM_KEY"{extra}

[[models]]
id = "test/gpt-fake"
providers = {{ {conn_id} = "gpt-fake" }}
price = {{ input = 2.0, output = 8.0, cache_read = 0.5 }}

[[models]]
id = "test/unpriced"
providers = {{ {conn_id} = "gpt-unpriced" }}
"""


UPSTREAM_KEY = "sk-upstream-SECRET-0123456789abcdef"


@asynccontextmanager
async def running_gateway(
    home: Path,
    config: str = "",
    *,
    env: dict[str, str] | None = None,
    deterministic: bool = False,
    stop_grace: float = 5.0,
    config_path: Path | None = None,
) -> AsyncIterator[RunningGateway]:
    """``config_path``: the config is written there and read from there, so the gateway
    can reload it."""
    text = "[server]\nport = 0\n" + config if "[server]" not in config else config
    environment = {"FAKE_UPSTREAM_KEY": UPSTREAM_KEY, **(env or {})}
    source = None
    if config_path is None:
        settings = build_settings(parse_config(text), environment, home)
    else:
        await asyncio.to_thread(config_path.write_text, text)
        source = SettingsSource(config_path, environment, home)
        settings = source.read()
    if deterministic:
        running = await start_gateway(
            settings, source=source, new_id=counting_ids(), wall_clock=lambda: FIXED_TIME
        )
    else:
        running = await start_gateway(settings, source=source)
    try:
        yield running
    finally:
        await stop_gateway(running, grace=stop_grace)
