"""``sluice serve --workers N`` (docs/deploy.md#workers): N processes on one port, each
pinned to its own core, sharing the connections and one SQLite file's books; a worker
that dies is started again; SIGTERM drains every worker's streams before all exit."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
from pathlib import Path

from sluice.storage.factory import open_store
from sluice.storage.sqlite import SqliteStore
from tests.support.accounts import metered_key
from tests.support.fake_openai import chunk, text_stream
from tests.support.fake_upstream import FakeUpstream, Reply, WaitFor
from tests.support.gateway import openai_connection_toml
from tests.support.process import gateway_process
from tests.support.raw_http import RawClient, exchange, post

USD = 10**9
BODY = json.dumps(
    {
        "model": "test/gpt-fake",
        "stream": True,
        "max_tokens": 50,
        "messages": [{"role": "user", "content": "hi"}],
    }
).encode()
USAGE = {"prompt_tokens": 10, "completion_tokens": 2, "total_tokens": 12}
CONFIG = "[server]\nsse_keepalive_interval = 0\nshutdown_grace = 5\n"


def _children(pid: int) -> list[int]:
    found = Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
    return sorted(int(child) for child in found)


def _core(pid: int) -> str:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("Cpus_allowed_list:"):
            return line.split()[1]
    raise AssertionError("no Cpus_allowed_list")


def _established(pid: int, port: int) -> int:
    """How many of ``pid``'s sockets are accepted connections on ``port``."""
    inodes = set()
    for fd in Path(f"/proc/{pid}/fd").iterdir():
        target = os.readlink(fd) if fd.is_symlink() else ""
        if target.startswith("socket:["):
            inodes.add(target[8:-1])
    count = 0
    for line in Path("/proc/net/tcp").read_text().splitlines()[1:]:
        fields = line.split()
        local_port = int(fields[1].split(":")[1], 16)
        if local_port == port and fields[3] == "01" and fields[9] in inodes:
            count += 1
    return count


async def _until(check: object, seconds: float = 10.0) -> None:
    async with asyncio.timeout(seconds):
        while not check():  # type: ignore[operator]
            await asyncio.sleep(0.05)


async def test_workers_share_the_port_the_cores_and_the_books(
    tmp_path: Path, fake: FakeUpstream
) -> None:
    release = asyncio.Event()
    fake.default = Reply.stream(
        chunk(role="assistant", content=""), WaitFor(release), *text_stream("ok", usage=USAGE)[1:]
    )
    home = tmp_path / "home"
    config = CONFIG + openai_connection_toml(fake.base_url)
    async with gateway_process(home, config, args=["--workers", "2"]) as gw:
        workers = _children(gw.pid)
        assert len(workers) == 2
        cores = sorted(os.sched_getaffinity(0))
        assert sorted(_core(w) for w in workers) == sorted(str(c) for c in cores[:2])
        store = await open_store(f"sqlite:///{home / 'sluice.db'}")
        key = await metered_key(store, "team", 1 * USD)
        clients = [await RawClient.connect(gw.host, gw.port) for _ in range(24)]
        for client in clients:
            await client.send(post("/v1/chat/completions", BODY, key))
        await _until(lambda: len(fake.requests) == 24)
        # the kernel spread the connections over both workers
        assert all(_established(w, gw.port) > 0 for w in workers)
        release.set()
        answers = [await client.read_response() for client in clients]
        for client in clients:
            await client.close()
    assert all(a.status == 200 and a.body.endswith(b"data: [DONE]\n\n") for a in answers)
    account = await store.get_account("team")
    assert account is not None and (account.held, account.open_holds) == (0, 0)
    assert isinstance(store, SqliteStore)
    ledger = await store.all("SELECT COUNT(*), SUM(amount) FROM ledger WHERE kind = 'charge'")
    assert ledger[0][0] == 24 and account.balance == 1 * USD + int(ledger[0][1])
    assert await store.reconcile() == []
    await store.close()


async def test_a_dead_worker_is_restarted_and_sigterm_drains_them_all(
    tmp_path: Path, fake: FakeUpstream
) -> None:
    release = asyncio.Event()
    fake.default = Reply.stream(*text_stream("fine"))
    config = CONFIG + openai_connection_toml(fake.base_url)
    async with gateway_process(tmp_path / "home", config, args=["--workers", "2"]) as gw:
        first = _children(gw.pid)
        os.kill(first[0], signal.SIGKILL)
        await _until(lambda: len(_children(gw.pid)) == 2 and _children(gw.pid) != first)
        assert first[1] in _children(gw.pid)  # the other one never stopped
        async with asyncio.timeout(10):
            restarted = await gw.log.wait_for("exited with code -9")
        assert "starting it again" in restarted
        served = [
            await exchange(gw.host, gw.port, post("/v1/chat/completions", BODY, gw.key))
            for _ in range(6)
        ]
        assert all(r.status == 200 for r in served)
        # a stream in flight when SIGTERM comes is finished, then every process exits
        fake.default = Reply.stream(
            chunk(role="assistant", content=""),
            chunk(content="early"),
            WaitFor(release),
            *text_stream("late")[1:],
        )
        client = await RawClient.connect(gw.host, gw.port)
        await client.send(post("/v1/chat/completions", BODY, gw.key))
        await client.read_head()
        workers = _children(gw.pid)
        os.kill(gw.pid, signal.SIGTERM)
        await asyncio.sleep(0.3)
        release.set()
        rest = b""
        async with asyncio.timeout(10):
            while (piece := await client.read_chunk()) is not None and piece:
                rest += piece
        await client.close()
        assert gw.process is not None
        assert await asyncio.wait_for(gw.process.wait(), 15) == 0
    assert b"data: [DONE]" in rest
    assert not [w for w in workers if Path(f"/proc/{w}").exists()]  # noqa: ASYNC240


def test_the_help_names_the_option() -> None:
    shown = subprocess.run(
        [sys.executable, "-m", "sluice", "serve", "--help"],
        capture_output=True, text=True, check=True, timeout=60,
    )  # fmt: skip
    assert "--workers" in shown.stdout and "own core" in shown.stdout


def test_metrics_listen_with_several_workers_is_refused(tmp_path: Path) -> None:
    config = tmp_path / "sluice.toml"
    config.write_text('[server]\nmetrics_listen = "127.0.0.1:0"\n')
    refused = subprocess.run(
        [sys.executable, "-m", "sluice", "serve", "--config", str(config), "--workers", "2"],
        capture_output=True, text=True, check=False, timeout=60,
        env={**os.environ, "SLUICE_HOME": str(tmp_path / "home")},
    )  # fmt: skip
    assert refused.returncode != 0
    assert "metrics_listen" in refused.stderr and "several workers" in refused.stderr
    assert not (tmp_path / "home").exists()  # refused before anything was prepared
