"""The benches' closed-loop load generator and their child processes.

One keep-alive HTTP/1.1 connection per client (uvloop, an asyncio protocol), one
request at a time on it, each chunked answer parsed to its last chunk; per run the
answers per second in the window after the warm-up, TTFB, TTFC (the first event that
carries text, by the target's pattern), latency, errors and the serving process's CPU
time per answer. Used by ``bench/messages_vs_chat.py`` and ``bench/observability.py``.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import re
import shutil
import socket
import statistics
import subprocess
import sys
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, cast

ROOT = Path(__file__).resolve().parent.parent
HOST = "127.0.0.1"
UPSTREAM_PORT = 9001  # bench/sluice-bench.toml points its connection here
GATEWAY_PORT = 8787
CHAT_PATH = "/v1/chat/completions"
PROMPT = [{"role": "user", "content": "Say hello in twenty words."}]
CHAT_TEXT = re.compile(rb'"content":"[^"]')
MESSAGES_TEXT = re.compile(rb'"type":"text_delta","text":"[^"]')
RESPONSES_TEXT = re.compile(rb'"logprobs":\[\],"delta":"[^"]')
CONTENT_LENGTH = re.compile(rb"content-length:\s*(\d+)")
OVERLAP = 64  # bytes searched again for a text pattern split between two reads


@dataclass(frozen=True)
class Target:
    """One endpoint: its name, port and the whole request, prebuilt."""

    name: str
    port: int
    request: bytes
    text: re.Pattern[bytes]
    pid: int  # the process that serves it, for its CPU time


def target(name: str, pid: int, path: str, headers: dict[str, str], body: object) -> Target:
    """A target with its whole request prebuilt and the pattern of its first text."""
    port = UPSTREAM_PORT if name == "direct" else GATEWAY_PORT
    payload = json.dumps(body, separators=(",", ":")).encode()
    lines = [f"POST {path} HTTP/1.1", f"host: {HOST}:{port}", "content-type: application/json"]
    lines += [f"{k}: {v}" for k, v in headers.items()] + [f"content-length: {len(payload)}"]
    request = ("\r\n".join(lines) + "\r\n\r\n").encode() + payload
    return Target(name, port, request, first_text(path), pid)


def first_text(path: str) -> re.Pattern[bytes]:
    """The pattern of an answer's first text event on this path's wire."""
    if "messages" in path:
        return MESSAGES_TEXT
    return RESPONSES_TEXT if "responses" in path else CHAT_TEXT


@dataclass(frozen=True)
class Sample:
    ttfb: float
    ttfc: float | None
    total: float
    ok: bool


class Connection(asyncio.Protocol):
    """A keep-alive HTTP/1.1 client connection with one request in flight at a time."""

    def __init__(self, text: re.Pattern[bytes]) -> None:
        self._text = text
        self._transport: asyncio.Transport | None = None
        self._buf = bytearray()
        self._waiter: asyncio.Future[Sample] | None = None
        self._reset(0.0)

    def _reset(self, start: float) -> None:
        self._start = start
        self._ttfb: float | None = None
        self._ttfc: float | None = None
        self._scan = 0
        self._status = 0
        self._body: int | None = None  # offset of the body once the head is read
        self._length: int | None = None  # content-length, or None when chunked
        self._pos = 0  # the next chunk's size line

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self._transport = cast(asyncio.Transport, transport)  # uvloop's is not a subclass

    def connection_lost(self, exc: Exception | None) -> None:
        self._transport = None
        if self._waiter is not None and not self._waiter.done():
            self._waiter.set_exception(ConnectionError("connection closed"))

    def send(self, request: bytes) -> asyncio.Future[Sample]:
        if self._transport is None:
            raise ConnectionError("not connected")
        self._waiter = asyncio.get_running_loop().create_future()
        self._reset(time.perf_counter())
        self._transport.write(request)
        return self._waiter

    def close(self) -> None:
        if self._transport is not None:
            self._transport.close()

    def data_received(self, data: bytes) -> None:
        now = time.perf_counter()
        if self._ttfb is None:
            self._ttfb = now
        buf = self._buf
        buf += data
        if self._ttfc is None and self._text.search(buf, self._scan):
            self._ttfc = now
        self._scan = max(0, len(buf) - OVERLAP)
        end = self._end()
        if end is not None:
            self._finish(end, now)

    def _end(self) -> int | None:
        """The answer's last offset in the buffer, or None while it is incomplete."""
        buf = self._buf
        if self._body is None:
            head_end = buf.find(b"\r\n\r\n")
            if head_end < 0:
                return None
            head = bytes(buf[:head_end]).lower()
            self._status = int(head[9:12])
            self._body = self._pos = head_end + 4
            found = CONTENT_LENGTH.search(head)
            self._length = None if b"chunked" in head else int(found.group(1)) if found else 0
        if self._length is not None:
            end = self._body + self._length
            return end if len(buf) >= end else None
        return self._chunks()

    def _chunks(self) -> int | None:
        buf, pos = self._buf, self._pos
        while (eol := buf.find(b"\r\n", pos)) >= 0:
            size = int(bytes(buf[pos:eol]).split(b";")[0], 16)
            after = eol + 2 + size + 2  # no trailers after the last chunk
            if len(buf) < after:
                break
            if size == 0:
                return after
            pos = after
        self._pos = pos
        return None

    def _finish(self, end: int, now: float) -> None:
        start = self._start
        ttfb = (self._ttfb or now) - start
        ttfc = None if self._ttfc is None else self._ttfc - start
        ok = self._status == 200 and ttfc is not None
        del self._buf[:end]
        waiter, self._waiter = self._waiter, None
        if waiter is not None and not waiter.done():
            waiter.set_result(Sample(ttfb, ttfc, now - start, ok))


Row = dict[str, float]  # one run's figures: rps, the percentiles in ms, errors


@dataclass
class Run:
    """What one run saw inside its window."""

    seconds: float
    ttfb: list[float] = field(default_factory=list)
    ttfc: list[float] = field(default_factory=list)
    total: list[float] = field(default_factory=list)
    errors: int = 0
    cpu: float = float("nan")  # the serving process's CPU seconds in the window

    def add(self, sample: Sample) -> None:
        if sample.ok and sample.ttfc is not None:
            self.ttfb.append(sample.ttfb)
            self.ttfc.append(sample.ttfc)
            self.total.append(sample.total)
        else:
            self.errors += 1

    def figures(self) -> Row:
        done = len(self.total)
        row: Row = {"requests": done, "errors": self.errors, "rps": done / self.seconds}
        row["cpu_us"] = self.cpu / done * 1e6 if done else float("nan")
        for name, got in (("ttfb", self.ttfb), ("ttfc", self.ttfc), ("lat", self.total)):
            row[f"{name}_p50_ms"] = pct(got, 50) * 1000
            row[f"{name}_p99_ms"] = pct(got, 99) * 1000
        return row


def pct(values: list[float], p: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(p / 100 * (len(ordered) - 1)))]


async def connect(target: Target) -> Connection:
    loop = asyncio.get_running_loop()
    _, conn = await loop.create_connection(lambda: Connection(target.text), HOST, target.port)
    return conn


async def client(target: Target, start: float, end: float, run: Run) -> None:
    """Send requests back to back until ``end``; count the answers done in the window."""
    conn = await connect(target)
    try:
        while time.perf_counter() < end:
            try:
                sample = await conn.send(target.request)
            except ConnectionError:
                run.errors += time.perf_counter() >= start
                conn = await connect(target)
                continue
            if start <= time.perf_counter() <= end:
                run.add(sample)
    finally:
        conn.close()


Results = dict[tuple[str, int], list[Row]]  # (target or variant, concurrency) -> runs, rep order


async def measure(target: Target, conc: int, duration: float, warmup: float) -> Row:
    start = time.perf_counter() + warmup
    run = Run(duration)
    clients = asyncio.gather(*[client(target, start, start + duration, run) for _ in range(conc)])
    await asyncio.sleep(warmup)
    cpu = cpu_seconds(target.pid)
    await asyncio.sleep(start + duration - time.perf_counter())
    run.cpu = cpu_seconds(target.pid) - cpu
    await asyncio.wait_for(clients, 30)
    return run.figures()


def cpu_seconds(pid: int) -> float:
    """User and system CPU time of a process and its threads (Linux), or NaN."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return float("nan")
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def log_run(name: str, conc: int, rep: int, row: Row, raw: Path | None, *, label: str) -> None:
    """One run's figures on stderr; with ``raw``, appended as a JSON line (``label``: the
    line's name for what ran, ``target`` or ``variant``)."""
    print(
        f"rep {rep} {name:>9} c={conc:<3} {row['rps']:7,.0f} rps  ttfb {row['ttfb_p50_ms']:.2f}"
        f"  ttfc {row['ttfc_p50_ms']:.2f} / {row['ttfc_p99_ms']:.2f} ms"
        f"  cpu {row['cpu_us']:.0f} us/req  errors {row['errors']:.0f}",
        file=sys.stderr,
        flush=True,
    )
    if raw is not None:
        with raw.open("a") as out:
            out.write(json.dumps({label: name, "conc": conc, "rep": rep, **row}) + "\n")


def med(figures: Sequence[float]) -> str:
    """Median (min-max) of one column."""
    if not figures:
        return "\u2014"
    fmt = "{:,.0f}" if min(figures) >= 100 else "{:+.2f}" if min(figures) < 0 else "{:.2f}"
    mid, low, high = (fmt.format(f(figures)) for f in (statistics.median, min, max))
    return f"{mid} ({low}\u2013{high})"


def column(results: Results, name: str, conc: int, key: str, base: str) -> list[float]:
    """A figure of every rep; ``added …``: minus the same rep's figure of ``base``."""
    if key.startswith("added "):
        key = key.removeprefix("added ")
        before = column(results, base, conc, key, base)
        figures = column(results, name, conc, key, base)
        return [a - b for a, b in zip(figures, before, strict=True)]
    return [row[key] for row in results.get((name, conc), [])]


def bench_config(port: int, home: Path, upstream: int, **server: object) -> str:
    """``bench/sluice-bench.toml`` listening on ``port``, its connection to the fake
    upstream on ``upstream``, SQLite in ``home`` and these more ``[server]`` settings."""
    text = (ROOT / "bench" / "sluice-bench.toml").read_text()
    text = text.replace("127.0.0.1:9001", f"127.0.0.1:{upstream}")
    extra = "".join(f"{name} = {json.dumps(value)}\n" for name, value in server.items())
    text = text.replace("[server]\n", f"[server]\nport = {port}\n{extra}", 1)
    return f'[storage]\nurl = "sqlite:///{home}/sluice.db"\n' + text


def sluice_cli(home: Path, *args: str) -> str:
    """``sluice ARGS --config HOME/sluice.toml`` with ``SLUICE_HOME=HOME``; its output."""
    env = {**os.environ, "SLUICE_HOME": str(home)}
    done = subprocess.run(
        [sys.executable, "-m", "sluice", *args, "--config", str(home / "sluice.toml")],
        capture_output=True, text=True, env=env, check=True, timeout=120,
    )  # fmt: skip
    return done.stdout.strip()


def pinned(core: int, argv: list[str]) -> list[str]:
    taskset = shutil.which("taskset")
    return [taskset, "-c", str(core), *argv] if taskset else argv


def wait_port(port: int, proc: subprocess.Popen[bytes], seconds: float = 20.0) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise SystemExit(f"{proc.args!r} exited with {proc.returncode}")
        with contextlib.suppress(OSError), socket.create_connection((HOST, port), 0.2):
            return
        time.sleep(0.1)
    raise SystemExit(f"nothing listens on {HOST}:{port} after {seconds:.0f} s")


@contextlib.contextmanager
def started(
    argv: list[str], port: int, env: dict[str, str] | None = None, stderr: Path | None = None
) -> Iterator[int]:
    """A child process, up once ``port`` accepts (stderr to a file when given, whose
    tail is shown if it dies first); stopped by its own pid on the way out."""
    with contextlib.ExitStack() as stack:
        err: IO[bytes] | int = subprocess.DEVNULL
        if stderr is not None:
            err = stack.enter_context(stderr.open("wb"))
        proc = subprocess.Popen(argv, env=env, stdout=subprocess.DEVNULL, stderr=err, cwd=ROOT)
        try:
            try:
                wait_port(port, proc)
            except SystemExit:
                tail = stderr.read_text()[-2000:] if stderr is not None else ""
                raise SystemExit(f"{argv[-1]} on port {port} did not start\n{tail}") from None
            yield proc.pid  # taskset execs the program: the same pid
        finally:
            proc.terminate()
            try:
                proc.wait(15)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


def sitting_args(doc: str | None, reps: int, concs: list[int]) -> argparse.ArgumentParser:
    """The options every sitting takes (its defaults: ``reps`` and ``concs``)."""
    ap = argparse.ArgumentParser(description=doc.splitlines()[0] if doc else None)
    ap.add_argument("--kit", default=os.environ.get("KIT", str(ROOT.parent / "shared" / "bench")))
    ap.add_argument("--reps", type=int, default=reps)
    ap.add_argument("--duration", type=float, default=2.0, help="seconds measured per run")
    ap.add_argument("--warmup", type=float, default=0.5, help="seconds before each window")
    ap.add_argument("--concs", type=int, nargs="+", default=concs)
    ap.add_argument("--raw", type=Path, help="append every run's figures as JSON lines")
    return ap


def kit_upstream(kit: str) -> Path:
    """The peer kit's fake upstream, or, in a clone without the kit, this repository's."""
    upstream = Path(kit) / "fake_upstream.py"
    if not upstream.is_file():
        print(f"no peer kit at {kit}: using bench/fake_upstream.py", file=sys.stderr)
        upstream = ROOT / "bench" / "fake_upstream.py"
    return upstream.resolve()
