"""The Messages (or Responses) front door beside chat completions: streamed req/s and
added TTFC.

    .venv/bin/python -m bench.messages_vs_chat [--door messages|responses] [--no-store]
        [--reps 20]
        [--duration 2] [--concs 1 16 64]

Issue 13's proof (and issue 21's with ``--door responses``), on the peer kit
(``../shared/bench`` or ``--kit``/``KIT``; without it, this repository's
``bench/fake_upstream.py``, the same stream): the fake upstream on core 0, ``sluice
serve --config bench/sluice-bench.toml`` on core 1 (a temporary ``SLUICE_HOME``, the
development key) and this script's own closed-loop load generator on core 0, all on
127.0.0.1. Every rep runs, at each concurrency, streamed ``/v1/chat/completions`` and
the door's path (same prompt, same upstream stream; their order swaps every rep) and
the upstream itself at the first concurrency, the baseline of the added TTFC. One
keep-alive connection per client, one request at a time. Per run: answers per second
in the window after the warm-up, TTFB, TTFC (the first event with text: chat
``"content":"x``, Messages ``"text_delta","text":"x``, Responses an
``output_text.delta``'s ``"delta":"x``), errors (not 200, no text, a dropped
connection) and the serving process's CPU time per answer. Prints a markdown table of
medians (min-max) over the reps and the door over chat as the median of the reps'
ratios: many short runs, paired in time, because this machine drifts.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import gc
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

import uvloop

from bench.loadgen import (
    CHAT_PATH,
    GATEWAY_PORT,
    PROMPT,
    ROOT,
    UPSTREAM_PORT,
    Results,
    Target,
    column,
    connect,
    kit_upstream,
    log_run,
    measure,
    med,
    pinned,
    sitting_args,
    started,
    target,
)


def targets(
    key: str, upstream: int, gateway: int, door: str, store: bool = True
) -> dict[str, Target]:
    chat = {"model": "fake-model", "stream": True, "messages": PROMPT}
    bearer = {"authorization": f"Bearer {key}"}
    if door == "messages":
        body = {"model": "fake-model", "max_tokens": 256, "stream": True, "messages": PROMPT}
        headers = {"x-api-key": key, "anthropic-version": "2023-06-01"}
    else:
        body = {"model": "fake-model", "stream": True, "input": PROMPT, "store": store}
        headers = bearer
    return {
        "direct": target("direct", upstream, CHAT_PATH, {}, chat),
        "chat": target("chat", gateway, CHAT_PATH, bearer, chat),
        door: target(door, gateway, f"/v1/{door}", headers, body),
    }


def door_of(results: Results) -> str:
    return next(name for name, _ in results if name not in ("direct", "chat"))


async def sitting(table: dict[str, Target], args: argparse.Namespace) -> Results:
    """All the runs, rep by rep; chat and the door swap places every other rep."""
    results: Results = {}
    for rep in range(1, args.reps + 1):
        doors = ["chat", args.door] if rep % 2 else [args.door, "chat"]
        for conc in args.concs:
            for name in (["direct"] if conc == args.concs[0] else []) + doors:
                gc.collect()
                row = await measure(table[name], conc, args.duration, args.warmup)
                results.setdefault((name, conc), []).append(row)
                log_run(name, conc, rep, row, args.raw, label="target")
    return results


def report(results: Results, concs: Sequence[int], c: int) -> str:
    """The markdown table, the door over chat, and the verdict of the 10 % target."""
    door = door_of(results)
    keys = [("rps", n) for n in concs] + [("cpu_us", n) for n in concs]
    keys += [(k, c) for k in ("ttfc_p50_ms", "ttfc_p99_ms", "added ttfc_p50_ms")]
    cols = [f"stream rps c={n}" for n in concs] + [f"CPU us/req c={n}" for n in concs]
    cols += [f"TTFC p50 c={c}", f"TTFC p99 c={c}", f"added TTFC p50 c={c}"]
    lines = [f"| endpoint | {' | '.join(cols)} | errors |", "|---" * (len(cols) + 2) + "|"]
    for name in ("direct", "chat", door):
        cells = [
            med(
                column(results, name, n, k, "direct")
                if name != "direct" or "added" not in k
                else []
            )
            for k, n in keys
        ]
        errors = sum(row["errors"] for (t, _), rows in results.items() if t == name for row in rows)
        lines.append(f"| {name} | {' | '.join(cells)} | {errors:.0f} |")
    shares = {(k, n): share(results, k, n) for k, n in keys}
    lines.append(
        f"| {door} / chat, per rep | {' | '.join(f'{x:+.1%}' for x in shares.values())} | |"
    )
    return "\n".join([*lines, "", verdict(results, concs, shares, c)])


def share(results: Results, key: str, conc: int) -> float:
    """The door over chat, minus one: the median of the reps' ratios (each rep's two runs
    are next to each other in time, so the machine's drift mostly cancels)."""
    msgs, chat = (column(results, n, conc, key, "direct") for n in (door_of(results), "chat"))
    return statistics.median(m / c for m, c in zip(msgs, chat, strict=True)) - 1


def verdict(
    results: Results, concs: Sequence[int], shares: dict[tuple[str, int], float], c: int
) -> str:
    slow = [f"c={n} {shares['rps', n]:+.1%}" for n in concs if shares["rps", n] < -0.10]
    gap = [
        statistics.median(column(results, n, c, "added ttfc_p50_ms", "direct"))
        for n in (door_of(results), "chat")
    ]
    late = shares["added ttfc_p50_ms", c]
    rps = "no (" + ", ".join(slow) + ")" if slow else "yes"
    ttfc = f"{'no' if late > 0.10 else 'yes'} ({gap[0] - gap[1]:+.3f} ms, {late:+.1%})"
    return f"Within 10 % of chat: stream req/s {rps}; added TTFC p50 at c={c} {ttfc}."


def gateway(home: str) -> list[str]:
    serve = ["serve", "--config", str(ROOT / "bench" / "sluice-bench.toml")]
    serve += ["--port", str(GATEWAY_PORT), "--log-level", "WARNING"]
    return pinned(1, [str(Path(sys.executable).parent / "sluice"), *serve])


async def bench(table: dict[str, Target], args: argparse.Namespace) -> Results:
    """One request to each endpoint (200 with text, or stop here), then the sitting."""
    for endpoint in table.values():
        conn = await connect(endpoint)
        sample = await asyncio.wait_for(conn.send(endpoint.request), 10)
        conn.close()
        if not sample.ok:
            raise SystemExit(f"{endpoint.name}: no streamed text in the answer (or not 200)")
    return await sitting(table, args)


def run_all(args: argparse.Namespace, upstream: Path) -> Results:
    with contextlib.suppress(AttributeError, OSError):  # the load generator: core 0
        os.sched_setaffinity(0, {0})
    kit_cmd = [sys.executable, str(upstream), "--port", str(UPSTREAM_PORT)]
    kit_cmd += ["--chunks", "20", "--chunk-bytes", "16"]
    with tempfile.TemporaryDirectory(prefix="sluice-bench-") as home:
        env = {**os.environ, "SLUICE_HOME": home}
        with (
            started(pinned(0, kit_cmd), UPSTREAM_PORT) as upstream_pid,
            started(gateway(home), GATEWAY_PORT, env) as gateway_pid,
        ):
            key = (Path(home) / "dev-key").read_text().strip()
            table = targets(key, upstream_pid, gateway_pid, args.door, not args.no_store)
            with asyncio.Runner(loop_factory=uvloop.new_event_loop) as runner:
                return runner.run(bench(table, args))


def main(argv: list[str] | None = None) -> int:
    parser = sitting_args(__doc__, reps=20, concs=[1, 16, 64])
    parser.add_argument("--door", choices=("messages", "responses"), default="messages")
    parser.add_argument(
        "--no-store", action="store_true", help="responses: store false (Codex's mode)"
    )
    args = parser.parse_args(argv)
    began = time.monotonic()
    results = run_all(args, kit_upstream(args.kit))
    print(report(results, args.concs, args.concs[0]))
    took = time.monotonic() - began
    print(f"\n{args.reps} reps of {args.duration:g} s per run, {took:.0f} s in all")
    return 0


if __name__ == "__main__":
    sys.exit(main())
