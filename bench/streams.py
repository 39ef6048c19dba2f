"""The stream suite, after onthebench's method: many concurrent streams of 64 deltas
20 ms apart, directly from the upstream and through each target, on one core.

    .venv/bin/python -m bench.streams [--concs 1 16 64 256 512 1024] [--targets ...]
    .venv/bin/python -m bench.streams --idle 10000        # RSS per idle open stream

Per concurrency and target: the frames delivered (of 64 per stream), stalls (a gap
between two frames over 200 ms), errors, time to first token p50/p99 and the gap
between frames p50/p99, each as added over the direct run at the same concurrency (the
direct rows show their own figures in brackets). Every stream of a run is opened first
and all send at once: the worst case for time to first token. A
concurrency is **sustained** when every frame arrived, nothing stalled and errors stay
under 0.1 %. Targets: ``direct`` (the upstream), ``pipe`` (the peer kit's aiohttp byte
pipe, when the kit is present), ``sluice`` (the development key) and
``sluice-metered`` (a credit-metered key on SQLite). The paced upstream and this
client share core 0; the target runs alone on core 1.

``--idle N`` opens N streams through Sluice to an upstream that sends one delta and
then nothing, and reports the gateway's RSS per open stream (the streams it held
before, minus a warm-up, divided by N).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import resource
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import uvloop

from bench.loadgen import HOST, ROOT, bench_config, pinned, sluice_cli, started
from bench.paced_upstream import FRAMES

UPSTREAM = 9031
GATEWAY = 8831
PIPE = 9131
STALL = 0.200
TOKEN = b'"content":"tok'

# --- the client -------------------------------------------------------------------------


@dataclass
class _Stream:
    sent: float = 0.0
    first: float | None = None
    last: float = 0.0
    frames: int = 0
    gaps: list[float] = field(default_factory=list)
    done: bool = False
    error: bool = False


class _Reader(asyncio.Protocol):
    def __init__(self, stream: _Stream, finished: asyncio.Future[None]) -> None:
        self._s = stream
        self._finished = finished
        self._tail = b""

    def data_received(self, data: bytes) -> None:
        now = time.perf_counter()
        s = self._s
        if s.sent == 0.0:
            return
        seen = self._tail + data
        count = seen.count(TOKEN)
        self._tail = seen[-(len(TOKEN) - 1) :]
        if count:
            if s.first is None:
                s.first = now
            else:
                s.gaps.append(now - s.last)
            s.last = now
            s.frames += count
        if b"0\r\n\r\n" in seen[-16:] and not self._finished.done():
            s.done = True
            self._finished.set_result(None)

    def connection_lost(self, exc: Exception | None) -> None:
        if not self._finished.done():
            self._s.error = not self._s.done
            self._finished.set_result(None)


def _request(port: int, key: str) -> bytes:
    body = json.dumps(
        {"model": "fake-model", "stream": True, "messages": [{"role": "user", "content": "hi"}]}
    ).encode()
    head = (
        f"POST /v1/chat/completions HTTP/1.1\r\nhost: {HOST}:{port}\r\n"
        f"authorization: Bearer {key}\r\ncontent-type: application/json\r\n"
        f"content-length: {len(body)}\r\n\r\n"
    )
    return head.encode() + body


async def _one(port: int, request: bytes, go: asyncio.Event, within: float) -> _Stream:
    loop = asyncio.get_running_loop()
    stream = _Stream()
    finished: asyncio.Future[None] = loop.create_future()
    try:
        transport, _ = await loop.create_connection(lambda: _Reader(stream, finished), HOST, port)
    except OSError:
        stream.error = True
        return stream
    await go.wait()
    stream.sent = time.perf_counter()
    transport.write(request)
    try:
        await asyncio.wait_for(finished, within)
    except TimeoutError:
        stream.error = True
    transport.close()
    return stream


def _pct(values: list[float], p: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(p * len(ordered)))]


@dataclass
class Run:
    target: str
    conc: int
    frames: int
    expected: int
    stalls: int
    errors: int
    ttft: list[float]
    gaps: list[float]

    @property
    def sustained(self) -> bool:
        return self.frames == self.expected and not self.stalls and self.errors <= self.conc / 1000


async def measure(target: str, port: int, key: str, conc: int) -> Run:
    go = asyncio.Event()
    request = _request(port, key)
    tasks = [asyncio.ensure_future(_one(port, request, go, 30 + conc / 50)) for _ in range(conc)]
    await asyncio.sleep(0.2 + conc / 2000)  # every connection open before any request
    go.set()
    streams = await asyncio.gather(*tasks)
    gaps = [g for s in streams for g in s.gaps]
    return Run(
        target,
        conc,
        sum(s.frames for s in streams),
        conc * FRAMES,
        sum(1 for s in streams if any(g > STALL for g in s.gaps)),
        sum(1 for s in streams if s.error or not s.done),
        [s.first - s.sent for s in streams if s.first is not None],
        gaps,
    )


def _row(run: Run, direct: Run | None) -> str:
    def ms(values: list[float], p: float, base: list[float] | None) -> str:
        if base is None:  # the direct run itself: its own figures
            return f"({_pct(values, p) * 1000:.2f})"
        return f"{(_pct(values, p) - _pct(base, p)) * 1000:+.2f}"

    base_ttft = direct.ttft if direct and run.target != "direct" else None
    base_gap = direct.gaps if direct and run.target != "direct" else None
    return (
        f"| {run.target} | {run.conc} | {run.frames:,} / {run.expected:,} | {run.stalls} | "
        f"{run.errors} | {ms(run.ttft, 0.5, base_ttft)} / {ms(run.ttft, 0.99, base_ttft)} | "
        f"{ms(run.gaps, 0.5, base_gap)} / {ms(run.gaps, 0.99, base_gap)} | "
        f"{'yes' if run.sustained else 'no'} |"
    )


# --- the targets ------------------------------------------------------------------------


@contextlib.contextmanager
def _target(name: str, kit: Path, work: Path) -> Iterator[tuple[int, str, int]]:
    """The target up on core 1: its port, the key to use and its pid."""
    if name == "direct":
        yield UPSTREAM, "sk-x", 0
        return
    if name == "pipe":
        argv = [sys.executable, str(kit / "passthrough_aiohttp.py"), "--port", str(PIPE)]
        argv += ["--upstream", f"http://{HOST}:{UPSTREAM}"]
        with started(pinned(1, argv), PIPE) as pid:
            yield PIPE, "sk-x", pid
        return
    home = work / name
    home.mkdir()
    config = bench_config(GATEWAY, home, UPSTREAM, sse_keepalive_interval=0)
    (home / "sluice.toml").write_text(config)
    sluice_cli(home, "init")
    key = ""
    if name == "sluice-metered":
        sluice_cli(home, "accounts", "create", "bench", "--credits", "1000000")
        key = sluice_cli(home, "keys", "create", "--account", "bench")
    argv = [sys.executable, "-m", "sluice", "serve", "--config", str(home / "sluice.toml")]
    env = {**os.environ, "SLUICE_HOME": str(home)}
    with started(pinned(1, [*argv, "--log-level", "WARNING"]), GATEWAY, env=env) as pid:
        yield GATEWAY, key or (home / "dev-key").read_text().strip(), pid


@contextlib.contextmanager
def _upstream(hold: bool) -> Iterator[int]:
    argv = [sys.executable, "-m", "bench.paced_upstream", str(UPSTREAM)]
    with started(pinned(0, [*argv, *(["--hold"] if hold else [])]), UPSTREAM) as pid:
        yield pid


def _rss(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    raise RuntimeError("no VmRSS")


async def _idle(count: int, kit: Path) -> None:
    with (
        tempfile.TemporaryDirectory() as tmp,
        _upstream(hold=True),
        _target("sluice", kit, Path(tmp)) as (port, key, pid),
    ):
        request = _request(port, key)
        warm = await _open_idle(port, request, 200)
        for transport in warm:
            transport.close()
        await asyncio.sleep(1.0)
        before = _rss(pid)
        held = []
        for start in range(0, count, 500):
            held += await _open_idle(port, request, min(500, count - start))
        await asyncio.sleep(1.0)
        after = _rss(pid)
        print(
            f"{count:,} idle open streams through Sluice: RSS {before / 2**20:.1f} MiB -> "
            f"{after / 2**20:.1f} MiB, {(after - before) / count / 1024:.1f} KiB per stream"
        )
        for transport in held:
            transport.close()


async def _open_idle(port: int, request: bytes, count: int) -> list[asyncio.Transport]:
    """``count`` streams, each open once its first delta arrived."""
    loop = asyncio.get_running_loop()

    async def one() -> asyncio.Transport:
        first: asyncio.Future[None] = loop.create_future()

        class _First(asyncio.Protocol):
            def data_received(self, data: bytes) -> None:
                if TOKEN in data and not first.done():
                    first.set_result(None)

        transport, _ = await loop.create_connection(_First, HOST, port)
        transport.write(request)
        await asyncio.wait_for(first, 60)
        return transport

    return list(await asyncio.gather(*(one() for _ in range(count))))


async def _sweep(targets: list[str], concs: list[int], kit: Path) -> list[Run]:
    runs: list[Run] = []
    with tempfile.TemporaryDirectory() as tmp, _upstream(hold=False):
        for name in targets:
            with _target(name, kit, Path(tmp)) as (port, key, _):
                await measure(name, port, key, 8)  # warm-up
                for conc in concs:
                    runs.append(await measure(name, port, key, conc))
                    print(_row(runs[-1], None), file=sys.stderr)
    return runs


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--concs", type=int, nargs="+", default=[1, 16, 64, 256, 512, 1024])
    ap.add_argument("--targets", nargs="+", default=["direct", "pipe", "sluice", "sluice-metered"])
    ap.add_argument("--idle", type=int, help="RSS per idle open stream at this many streams")
    ap.add_argument("--kit", default=os.environ.get("KIT", str(ROOT.parent / "shared" / "bench")))
    args = ap.parse_args(argv)
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    with contextlib.suppress(ValueError, OSError):
        resource.setrlimit(resource.RLIMIT_NOFILE, (max(soft, 65536), max(hard, 65536)))
    with contextlib.suppress(OSError, AttributeError):
        os.sched_setaffinity(0, {0})
    kit = Path(args.kit)
    if args.idle:
        uvloop.run(_idle(args.idle, kit))
        return 0
    targets = [t for t in args.targets if t != "pipe" or (kit / "passthrough_aiohttp.py").exists()]
    runs = uvloop.run(_sweep(targets, args.concs, kit))
    direct = {r.conc: r for r in runs if r.target == "direct"}
    print("| target | streams | frames | stalls | errors | added TTFT p50 / p99 ms "
          "| added gap p50 / p99 ms | sustained |")  # fmt: skip
    print("|---|---|---|---|---|---|---|---|")
    for run in runs:
        print(_row(run, direct.get(run.conc)))
    for name in targets:
        ok = [r.conc for r in runs if r.target == name and r.sustained]
        print(f"{name}: highest sustained {max(ok) if ok else 0} streams")
    print(f"(medians of one run each; {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
