"""``sluice serve --workers N``: N gateway processes on one port, each on its own core
(docs/deploy.md#workers).

The supervisor (the ``sluice serve`` the operator started) prepares storage once
(migrations, the development key), then starts N workers: the same command in the
worker's role (:data:`WORKER_ENV`), each pinned to one of the cores it may use and
listening on the same address with ``SO_REUSEPORT``, so the kernel spreads connections
over them. A worker that dies is started again (after a second when it dies young, so a
broken one does not spin); ``SIGTERM`` / ``SIGINT`` reach every worker, each drains as a
single gateway does (``[server] shutdown_grace``), and the supervisor exits when the
last one has; ``SIGHUP`` reloads every worker's config. Several workers on one SQLite
file are safe (WAL, writes in ``BEGIN IMMEDIATE`` transactions that wait for each
other), and by default share the response cache's answers in another; with more than
one replica PostgreSQL is the store.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import signal
import socket
import sys
import time
from collections.abc import Sequence

from sluice.accounts.dev_key import DevKey, ensure_dev_key
from sluice.ids import ordered_id
from sluice.settings import Settings
from sluice.storage.factory import open_store

_log = logging.getLogger("sluice.server")

WORKER_ENV = "SLUICE_WORKER"
"""Set in a worker's environment: its index and core, ``"<index>:<core>"``."""
READY = b"sluice-worker-ready\n"
"""What a worker writes on its standard output once it listens."""
_YOUNG = 5.0
"""A worker that dies sooner than this after it started waits a second to restart."""


def worker_role() -> tuple[int, int] | None:
    """This process's worker index and core, when a supervisor started it."""
    role = os.environ.get(WORKER_ENV)
    if not role:
        return None
    index, core = role.split(":")
    return int(index), int(core)


def become_worker(core: int) -> None:
    """Pin this process to its core (where the system lets it)."""
    with contextlib.suppress(OSError, AttributeError):
        os.sched_setaffinity(0, {core})


def announce_ready() -> None:
    sys.stdout.buffer.write(READY)
    sys.stdout.buffer.flush()


def free_port(host: str) -> int:
    """A port nothing listens on now, for ``--port 0`` shared by every worker."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as probe:
        probe.bind((host, 0))
        return int(probe.getsockname()[1])


async def prepare_storage(settings: Settings) -> DevKey | None:
    """Migrations and the development key, once, before any worker starts."""
    settings.home.mkdir(parents=True, exist_ok=True, mode=0o700)
    store = await open_store(settings.storage_url)
    try:
        if settings.server.dev_key is not True:
            return None
        return await ensure_dev_key(
            store, settings.home, ordered_id, os.urandom(32), int(time.time())
        )
    finally:
        await store.close()


class _Worker:
    __slots__ = ("core", "index", "process", "started")

    def __init__(self, index: int, core: int) -> None:
        self.index = index
        self.core = core
        self.process: asyncio.subprocess.Process | None = None
        self.started = 0.0


class Supervisor:
    def __init__(self, command: Sequence[str], count: int, grace: float) -> None:
        """``command``: how to start one worker (``sluice serve`` with the port every
        worker shares; :data:`WORKER_ENV` makes it one worker of ``--workers``)."""
        self._command = list(command)
        cores = sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else [0]
        self._workers = [_Worker(i, cores[i % len(cores)]) for i in range(count)]
        self._grace = grace
        self._stopping = False

    @property
    def pids(self) -> list[int]:
        return [w.process.pid for w in self._workers if w.process is not None]

    async def start(self) -> None:
        """Every worker listening; raises RuntimeError (the others stopped) when one
        exits first."""
        try:
            await asyncio.gather(*(self._spawn(w) for w in self._workers))
        except BaseException:
            await self.stop()
            raise

    async def run(self) -> None:
        """Restart workers that die until :meth:`stop`."""
        watches = [asyncio.ensure_future(self._watch(w)) for w in self._workers]
        try:
            await asyncio.gather(*watches)
        finally:
            for watch in watches:
                watch.cancel()

    def signal_all(self, sig: int) -> None:
        for pid in self.pids:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, sig)

    async def stop(self) -> None:
        """Every worker drains and exits (killed past its grace and a margin)."""
        self._stopping = True
        self.signal_all(signal.SIGTERM)
        running = [w.process for w in self._workers if w.process is not None]
        waits = [asyncio.ensure_future(p.wait()) for p in running]
        if not waits:
            return
        _, late = await asyncio.wait(waits, timeout=self._grace + 10)
        if late:
            self.signal_all(signal.SIGKILL)
            await asyncio.wait(late)

    async def _spawn(self, worker: _Worker) -> None:
        env = {**os.environ, WORKER_ENV: f"{worker.index}:{worker.core}"}
        process = await asyncio.create_subprocess_exec(
            *self._command, env=env, stdout=asyncio.subprocess.PIPE
        )
        worker.process, worker.started = process, time.monotonic()
        assert process.stdout is not None
        line = await process.stdout.readline()
        if line != READY:
            code = await process.wait()
            raise RuntimeError(f"worker {worker.index} exited with code {code} before it listened")

    async def _watch(self, worker: _Worker) -> None:
        while worker.process is not None:
            code = await worker.process.wait()
            if self._stopping:
                return
            lived = time.monotonic() - worker.started
            _log.error(
                "worker %d (pid %d) exited with code %s after %.1f s; starting it again",
                worker.index, worker.process.pid, code, lived,
            )  # fmt: skip
            if lived < _YOUNG:
                await asyncio.sleep(1.0)
            if self._stopping:
                return
            try:
                await self._spawn(worker)
            except RuntimeError as exc:
                _log.error("%s", exc)
