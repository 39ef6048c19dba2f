"""A gateway in its own process, as a user starts it (for RSS and signal tests)."""

from __future__ import annotations

import asyncio
import os
import re
import signal
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path

BANNER = re.compile(rb"listening on http://([\d.]+):(\d+)")


@dataclass
class GatewayProcess:
    pid: int
    host: str
    port: int
    key: str

    def rss_bytes(self) -> int:
        for line in Path(f"/proc/{self.pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
        raise RuntimeError("no VmRSS")


def write_config(home: Path, config: str) -> Path:
    home.mkdir(parents=True, exist_ok=True)
    path = home / "sluice.toml"
    path.write_text(config)
    return path


@asynccontextmanager
async def gateway_process(home: Path, config: str) -> AsyncIterator[GatewayProcess]:
    path = write_config(home, config)
    env = {**os.environ, "SLUICE_HOME": str(home), "PYTHONUNBUFFERED": "1"}
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "sluice",
        "serve",
        "--config",
        str(path),
        "--port",
        "0",
        "--log-level",
        "WARNING",
        stderr=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.DEVNULL,
        env=env,
    )
    assert proc.stderr is not None
    banner = b""
    try:
        while b"Press Ctrl-C" not in banner:
            line = await asyncio.wait_for(proc.stderr.readline(), 20)
            if not line:
                raise RuntimeError(f"gateway did not start: {banner.decode()}")
            banner += line
        match = BANNER.search(banner)
        assert match is not None
        key = (home / "dev-key").read_text().strip()
        yield GatewayProcess(proc.pid, match.group(1).decode(), int(match.group(2)), key)
    finally:
        if proc.returncode is None:
            proc.send_signal(signal.SIGTERM)
        await asyncio.wait_for(proc.wait(), 10)
