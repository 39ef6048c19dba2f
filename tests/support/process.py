"""A gateway in its own process, as a user starts it (for RSS and signal tests)."""

from __future__ import annotations

import asyncio
import os
import re
import signal
import sys
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path

from tests.support.gateway import UPSTREAM_KEY

BANNER = re.compile(rb"listening on http://([\d.]+):(\d+)")


class LogTail:
    """The gateway's stderr after its banner, read as it comes (the pipe never fills)."""

    def __init__(self) -> None:
        self.lines: list[str] = []
        self._grew = asyncio.Event()

    async def pump(self, stream: asyncio.StreamReader) -> None:
        while line := await stream.readline():
            self.lines.append(line.decode(errors="replace"))
            self._grew.set()

    def mark(self) -> int:
        return len(self.lines)

    async def wait_for(self, text: str, *, since: int = 0) -> str:
        """The first line from ``since`` on that contains ``text`` (bound it with
        ``asyncio.timeout``)."""
        while True:
            found = next((line for line in self.lines[since:] if text in line), None)
            if found is not None:
                return found
            self._grew.clear()
            await self._grew.wait()


@dataclass
class GatewayProcess:
    pid: int
    host: str
    port: int
    key: str
    config: Path
    log: LogTail
    process: asyncio.subprocess.Process | None = None

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
async def gateway_process(
    home: Path,
    config: str,
    *,
    env: dict[str, str] | None = None,
    log_level: str = "WARNING",
    args: Sequence[str] = (),
) -> AsyncIterator[GatewayProcess]:
    """``args``: more ``sluice serve`` options (``--workers 2``)."""
    path = write_config(home, config)
    environ = {
        **os.environ,
        "SLUICE_HOME": str(home),
        "PYTHONUNBUFFERED": "1",
        "FAKE_UPSTREAM_KEY": UPSTREAM_KEY,
        **(env or {}),
    }
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
        log_level,
        *args,
        stderr=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.DEVNULL,
        env=environ,
    )
    assert proc.stderr is not None
    banner = b""
    tail = LogTail()
    pump: asyncio.Task[None] | None = None
    try:
        while b"Press Ctrl-C" not in banner:
            line = await asyncio.wait_for(proc.stderr.readline(), 20)
            if not line:
                raise RuntimeError(f"gateway did not start: {banner.decode()}")
            banner += line
        match = BANNER.search(banner)
        assert match is not None
        key = (home / "dev-key").read_text().strip()
        pump = asyncio.ensure_future(tail.pump(proc.stderr))
        host, port = match.group(1).decode(), int(match.group(2))
        yield GatewayProcess(proc.pid, host, port, key, path, tail, proc)
    finally:
        if proc.returncode is None:
            proc.send_signal(signal.SIGTERM)
        await asyncio.wait_for(proc.wait(), 10)
        if pump is not None:
            await asyncio.wait_for(pump, 5)
