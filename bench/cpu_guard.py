"""The CPU guard: instructions one credit-metered streamed request costs the gateway,
against the committed baseline (``bench/cpu_baseline.json``); ``make test`` fails when
it grows more than 10 %.

    .venv/bin/python -m bench.cpu_guard                 # check (exit 1 over the bound)
    .venv/bin/python -m bench.cpu_guard --update "why"  # measure and commit a new baseline
    .venv/bin/python -m bench.cpu_guard --chunks 1      # the figure only, at another size

Wall time on a shared 2-core machine is noise; instruction counts are not. The gateway
(``sluice serve``, SQLite, a credit-metered key, the access log off) runs under
``valgrind --tool=callgrind`` with instrumentation off; after a warm-up the guard turns
it on (``callgrind_control -i on``), sends ``--requests`` streamed chat completions one
at a time to this repository's fake upstream (20 chunks of 16 B, as the peer kit), and
reads the instructions counted. The figure is per request, everything the process did
included (event loop, write-behind, settlement): the hot path and what hangs off it.
Timers (the write-behind's batches) still vary a little with the machine's speed, so
the fewest of ``--runs`` runs counts (noise only ever adds instructions).
A baseline changes only with ``--update`` and a reason, recorded in the file.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench.loadgen import bench_config, sluice_cli

ROOT = Path(__file__).resolve().parent.parent
BASELINE = ROOT / "bench" / "cpu_baseline.json"
BOUND = 1.10
CHUNKS = 20
BODY = json.dumps(
    {
        "model": "fake-model",
        "stream": True,
        "stream_options": {"include_usage": True},
        "max_tokens": 64,
        "messages": [{"role": "user", "content": "Say hello."}],
    }
).encode()


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def wait_port(port: int, proc: subprocess.Popen[bytes], seconds: float) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise SystemExit(f"the process on port {port} exited ({proc.returncode})")
        try:
            socket.create_connection(("127.0.0.1", port), 0.2).close()
            return
        except OSError:
            time.sleep(0.1)
    raise SystemExit(f"nothing listens on port {port} after {seconds} s")


def stream_once(conn: socket.socket, port: int, key: str) -> None:
    """One streamed request on a keep-alive connection, read to its last chunk."""
    head = (
        f"POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n"
        f"Authorization: Bearer {key}\r\nContent-Type: application/json\r\n"
        f"Content-Length: {len(BODY)}\r\n\r\n"
    ).encode()
    conn.sendall(head + BODY)
    got = b""
    while not got.endswith(b"0\r\n\r\n"):
        piece = conn.recv(65536)
        if not piece:
            raise SystemExit("the gateway closed the connection")
        got += piece
    if not got.startswith(b"HTTP/1.1 200") or b"[DONE]" not in got:
        raise SystemExit(f"not a whole stream: {got[:300]!r}")


def measure(requests: int, warmup: int, extra_env: dict[str, str], chunks: int = CHUNKS) -> float:
    """Instructions per metered streamed request."""
    with tempfile.TemporaryDirectory() as tmp:
        home = Path(tmp)
        upstream_port, port = free_port(), free_port()
        (home / "sluice.toml").write_text(bench_config(port, home, upstream_port))
        sluice_cli(home, "init")
        sluice_cli(home, "accounts", "create", "guard", "--credits", "1000")
        key = sluice_cli(home, "keys", "create", "--account", "guard")
        fake = subprocess.Popen(
            [
                sys.executable,
                str(ROOT / "bench" / "fake_upstream.py"),
                "--port",
                str(upstream_port),
                "--chunks",
                str(chunks),
            ],
            stdout=subprocess.DEVNULL,
        )
        out = home / "callgrind.out"
        env = {**os.environ, "SLUICE_HOME": str(home), "PYTHONHASHSEED": "0", **extra_env}
        gateway = subprocess.Popen(
            [
                "valgrind", "--tool=callgrind", "--instr-atstart=no",
                f"--callgrind-out-file={out}", sys.executable, "-m", "sluice", "serve",
                "--config", str(home / "sluice.toml"), "--log-level", "WARNING",
            ],
            env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )  # fmt: skip
        try:
            wait_port(upstream_port, fake, 30)
            wait_port(port, gateway, 180)
            with socket.create_connection(("127.0.0.1", port)) as conn:
                for _ in range(warmup):
                    stream_once(conn, port, key)
                control(gateway.pid, "--instr=on")
                for _ in range(requests):
                    stream_once(conn, port, key)
                control(gateway.pid, "--instr=off")
        finally:
            gateway.terminate()
            gateway.wait(120)
            fake.terminate()
            fake.wait(10)
        return instructions(out) / requests


def control(pid: int, *args: str) -> None:
    subprocess.run(
        ["callgrind_control", *args, str(pid)], check=True, capture_output=True, timeout=60
    )


def instructions(out: Path) -> int:
    """The ``totals:`` line of a callgrind output file (its ``summary:`` line counts
    from program start, when instrumentation was still off)."""
    found = re.search(rb"^totals: (\d+)", out.read_bytes(), re.MULTILINE)
    total = int(found[1]) if found else 0
    if not total:
        raise SystemExit(f"no instruction count in {out}")
    return total


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--requests", type=int, default=200)
    parser.add_argument(
        "--runs", type=int, default=3, help="the fewest instructions of this many runs count"
    )
    parser.add_argument("--warmup", type=int, default=50)
    parser.add_argument("--update", metavar="REASON", help="commit a new baseline, saying why")
    parser.add_argument("--baseline", type=Path, default=BASELINE)
    parser.add_argument(
        "--chunks",
        type=int,
        default=CHUNKS,
        help="content chunks per stream; any other count than 20 only prints the figure "
        "(two counts split a request's cost into its fixed part and a chunk's)",
    )
    parser.add_argument(
        "--plant",
        type=Path,
        help="a directory first on the gateway's PYTHONPATH (its sitecustomize.py may plant "
        "a slowdown: the guard's own test)",
    )
    args = parser.parse_args(argv)
    planted = {} if args.plant is None else {"PYTHONPATH": str(args.plant)}
    runs = (measure(args.requests, args.warmup, planted, args.chunks) for _ in range(args.runs))
    per_request = min(runs)
    if args.chunks != CHUNKS:
        print(
            f"{per_request:,.0f} instructions per metered streamed request of {args.chunks} chunks"
        )
        return 0
    if args.update:
        record = {"instructions_per_request": round(per_request), "reason": args.update,
                  "requests": args.requests, "runs": args.runs, "bound": BOUND}  # fmt: skip
        args.baseline.write_text(json.dumps(record, indent=2) + "\n")
        print(f"baseline: {per_request:,.0f} instructions per request ({args.update})")
        return 0
    baseline = json.loads(args.baseline.read_text())["instructions_per_request"]
    ratio = per_request / baseline
    verdict = "ok" if ratio <= BOUND else "FAIL"
    print(
        f"cpu guard: {per_request:,.0f} instructions per metered streamed request, "
        f"baseline {baseline:,.0f} ({ratio:.3f}x, bound {BOUND:.2f}x): {verdict}"
    )
    return 0 if ratio <= BOUND else 1


if __name__ == "__main__":
    sys.exit(main())
