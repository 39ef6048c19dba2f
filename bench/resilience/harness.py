"""What every row of the resilience suite uses: the registry, a context, gateway processes.

A row is an ``async def`` taking a :class:`Context` and returning the :class:`Row` s it
measured; :func:`row` registers it under a name. A gateway runs in a process of its
own (``python -m sluice serve``), its log written to a file in its home (so a row can
read every line it logged, at any level), optionally pinned to one core.
"""

from __future__ import annotations

import asyncio
import os
import re
import shutil
import signal
import statistics
import sys
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

Tier = Literal["fast", "full"]
BANNER = re.compile(r"listening on http://([\d.]+):(\d+)")
MIB = 1024 * 1024


@dataclass
class Row:
    """One line of the table: what was measured, what it must be, whether it is."""

    name: str
    figure: str
    criterion: str
    passed: bool


@dataclass
class Context:
    tier: Tier
    workdir: Path
    seed: int = 20261201
    gateway_cpu: int | None = None
    """Core the gateways are pinned to (taskset), when the machine has more than one."""
    _homes: int = field(default=0, repr=False)

    def n(self, fast: int, full: int) -> int:
        """A count for this tier."""
        return fast if self.tier == "fast" else full

    def home(self, name: str) -> Path:
        self._homes += 1
        path = self.workdir / f"{self._homes:03d}-{name}"
        path.mkdir(parents=True)
        return path


RowFunction = Callable[[Context], Awaitable[list[Row]]]
ROWS: dict[str, RowFunction] = {}


def row(name: str) -> Callable[[RowFunction], RowFunction]:
    """Register a row function under ``name`` (the suite runs them in this order)."""

    def register(fn: RowFunction) -> RowFunction:
        ROWS[name] = fn
        return fn

    return register


@dataclass
class Gateway:
    pid: int
    host: str
    port: int
    key: str
    home: Path
    log: Path

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"

    def rss_bytes(self) -> int:
        for line in Path(f"/proc/{self.pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
        raise RuntimeError("no VmRSS")

    def cpu_seconds(self) -> float:
        """User plus system CPU time the gateway process has used so far."""
        fields = Path(f"/proc/{self.pid}/stat").read_text().rpartition(")")[2].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

    def bytes_read(self) -> int:
        """Bytes the gateway process has read so far (sockets included: ``rchar``)."""
        for line in Path(f"/proc/{self.pid}/io").read_text().splitlines():
            if line.startswith("rchar:"):
                return int(line.split()[1])
        raise RuntimeError("no rchar")

    def log_text(self) -> str:
        return self.log.read_text(errors="replace")

    def kill(self, sig: int = signal.SIGKILL) -> None:
        os.kill(self.pid, sig)


def _command(ctx: Context, args: list[str]) -> list[str]:
    base = [sys.executable, "-m", "sluice", "serve", *args]
    if ctx.gateway_cpu is not None and shutil.which("taskset"):
        return ["taskset", "-c", str(ctx.gateway_cpu), *base]
    return base


@asynccontextmanager
async def gateway(
    ctx: Context,
    config: str,
    *,
    name: str = "gw",
    log_level: str = "WARNING",
    env: dict[str, str] | None = None,
    home: Path | None = None,
) -> AsyncIterator[Gateway]:
    """A gateway process on a free port with ``config``; stopped (SIGTERM) at the end.
    ``home``: reuse a home (a restart after a kill); by default a fresh one."""
    home = home or ctx.home(name)
    path = home / "sluice.toml"
    path.write_text(config)
    log = home / "gateway.log"
    start = log.stat().st_size if log.exists() else 0  # a restart appends to the old log
    environment = {**os.environ, "SLUICE_HOME": str(home), "PYTHONUNBUFFERED": "1"}
    environment |= env or {}
    args = ["--config", str(path), "--port", "0", "--log-level", log_level]
    with log.open("ab") as sink:
        proc = await asyncio.create_subprocess_exec(
            *_command(ctx, args), stdout=asyncio.subprocess.DEVNULL, stderr=sink, env=environment
        )
    try:
        match = await _banner(proc, log, start)
        key = (home / "dev-key").read_text().strip() if (home / "dev-key").exists() else ""
        yield Gateway(proc.pid, match.group(1), int(match.group(2)), key, home, log)
    finally:
        if proc.returncode is None:
            proc.send_signal(signal.SIGTERM)
            try:
                await asyncio.wait_for(proc.wait(), 15)
            except TimeoutError:
                proc.kill()
                await proc.wait()


async def _banner(proc: asyncio.subprocess.Process, log: Path, start: int) -> re.Match[str]:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + 30
    while loop.time() < deadline:
        text = log.read_bytes()[start:].decode(errors="replace")
        if "Press Ctrl-C" in text and (match := BANNER.search(text)):
            return match
        if proc.returncode is not None:
            break
        await asyncio.sleep(0.02)
    raise RuntimeError(f"the gateway did not start:\n{log.read_text(errors='replace')[-2000:]}")


def percentile(values: list[float], q: float) -> float:
    """The ``q``-th percentile (0..100) by the nearest-rank rule; 0 for no values."""
    if not values:
        return 0.0
    ordered = sorted(values)
    rank = max(1, round(q / 100 * len(ordered)))
    return ordered[min(rank, len(ordered)) - 1]


def median(values: list[float]) -> float:
    return statistics.median(values) if values else 0.0
