"""Run the resilience suite and write its table (see the package docstring)."""

from __future__ import annotations

import argparse
import asyncio
import os
import platform
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path

from bench.resilience import rows
from bench.resilience.harness import ROWS, Context, Row, Tier


async def run_rows(ctx: Context, names: list[str]) -> list[tuple[str, list[Row], float]]:
    out = []
    for name in names:
        started = time.monotonic()
        try:
            found = await ROWS[name](ctx)
        except Exception as exc:  # a row that crashes is a failed row, the suite goes on
            found = [Row(name, f"crashed: {type(exc).__name__}: {exc}"[:300], "runs", False)]
        took = time.monotonic() - started
        for r in found:
            print(f"{'PASS' if r.passed else 'FAIL'}  {r.name}: {r.figure}", flush=True)
        out.append((name, found, took))
    return out


def _commit() -> str:
    try:
        return subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, check=True
        ).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


def table(results: list[tuple[str, list[Row], float]], tier: Tier, command: str) -> str:
    passed = sum(r.passed for _, found, _ in results for r in found)
    total = sum(len(found) for _, found, _ in results)
    lines = [
        "# Resilience",
        "",
        "Sluice tested from outside, as an attacker and a bad network would: real gateway",
        "processes on 127.0.0.1, fake upstreams speaking each provider's format. Each row",
        "says what was measured and what it must be. Produced by:",
        "",
        "```sh",
        command,
        "```",
        "",
        f"{datetime.now(UTC):%Y-%m-%d %H:%M} UTC, commit {_commit()}, tier `{tier}`, "
        f"{os.cpu_count()} cores, Python {platform.python_version()}: "
        f"**{passed} of {total} rows pass**.",
        "",
        "| row | figure | pass criterion | result | s |",
        "|---|---|---|---|---|",
    ]
    for _, found, took in results:
        for i, r in enumerate(found):
            seconds = f"{took:.1f}" if i == 0 else ""
            lines.append(
                f"| {r.name} | {r.figure} | {r.criterion} | {'pass' if r.passed else '**FAIL**'} "
                f"| {seconds} |"
            )
    return "\n".join(lines) + "\n"


def main() -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.resilience")
    parser.add_argument("--tier", choices=["fast", "full"], default="full")
    parser.add_argument("--only", action="append", default=[], help="row group to run")
    parser.add_argument("--write", type=Path, help="write the table to this file")
    parser.add_argument("--gateway-cpu", type=int, default=None)
    args = parser.parse_args()
    names = [n for n in ROWS if not args.only or any(o in n for o in args.only)]
    cpu = args.gateway_cpu
    if cpu is None and (os.cpu_count() or 1) > 1:
        cpu = 1
    with tempfile.TemporaryDirectory(prefix="sluice-resilience-") as tmp:
        ctx = Context(args.tier, Path(tmp), gateway_cpu=cpu)
        results = asyncio.run(run_rows(ctx, names))
    text = table(results, args.tier, " ".join(["python -m bench.resilience", *sys.argv[1:]]))
    if args.write:
        args.write.write_text(text)
    print(text)
    return 0 if all(r.passed for _, found, _ in results for r in found) else 1


assert rows  # the row modules register themselves on import
if __name__ == "__main__":
    sys.exit(main())
