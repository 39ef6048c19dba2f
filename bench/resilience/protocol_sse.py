"""The "malformed SSE and event streams" rows: every stream translator against hostile
bytes, as hand vectors (``protocol_stream_cases``), hypothesis properties
(``protocol_rechunk``) and atheris.

The translators run in-process (they are pure); atheris runs in a subprocess of its own
(``bench/resilience/protocol_fuzz.py``: libFuzzer ends the process it runs in).
"""

from __future__ import annotations

import asyncio
import json
import random
import re
import sys
import traceback
from pathlib import Path
from typing import Any

from bench.resilience.harness import Context, Row
from bench.resilience.protocol_fuzz import Target as FuzzTarget
from bench.resilience.protocol_fuzz import frame_input
from bench.resilience.protocol_rechunk import properties
from bench.resilience.protocol_stream_cases import CaseResult, check_case, sse_cases
from bench.resilience.protocol_streams import BEDROCK, FIXTURES, SMALL, SSE_KINDS
from bench.resilience.protocol_support import few, table_row
from bench.resilience.protocol_vectors_eventstream import eventstream_vectors
from bench.resilience.protocol_vectors_sse import sse_vectors

ROOT = Path(__file__).resolve().parents[2]


def _hand_vectors(ctx: Context) -> Row:
    rng = random.Random(ctx.seed)
    cases = sse_cases(rng)
    results: list[CaseResult] = [
        check_case(
            kind,
            name,
            data,
            bound,
            rng=rng,
            random_splits=ctx.n(1, 8),
            bytewise=ctx.tier == "full" or bound <= 4 * SMALL,
        )
        for kind, name, data, bound in cases
    ]
    n_sse = len(sse_vectors(random.Random(0)))
    n_es = len(eventstream_vectors(random.Random(0)))
    dependent = [r for r in results if r.split_dependent]
    problems = [r for r in results if r.problems]
    over = [r for r in results if r.over_bound > 0]
    sse_worst = max((r.worst for r in results if r.kind != BEDROCK), key=lambda w: w[0] / w[1])
    es_worst = max((r.worst for r in results if r.kind == BEDROCK), key=lambda w: w[0] / w[1])
    notes = []
    if dependent:
        names = sorted({r.name.removesuffix(" (in a valid stream)") for r in dependent})
        notes.append(f"split-dependent: {few(names, 8)}")
    if problems:
        notes.append(f"raised: {few([f'{r.kind} {r.name}: {r.problems[0]}' for r in problems])}")
    if over:
        names = sorted({r.name.removesuffix(" (in a valid stream)") for r in over})
        notes.append(f"over the bound: {few(names, 5)}")
    figure = (
        f"{n_sse} SSE vectors x {len(SSE_KINDS)} translators + {n_es} event-stream vectors "
        f"(Bedrock), each alone and inside a valid stream ({len(cases)} cases), fed whole, "
        f"{'byte by byte' if ctx.tier == 'full' else 'byte by byte (61-byte reads above 4 KiB)'}"
        f" and at {ctx.n(1, 8)} random splits: {len(dependent)} split-dependent, "
        f"{len(problems)} raising from feed or finish (not an ApiError), {len(over)} with "
        f"buffered above the bound (worst: SSE {sse_worst[0]} of {sse_worst[1]}, event "
        f"stream {es_worst[0]} of {es_worst[1]} with the last read)"
    )
    if notes:
        figure += ". " + ". ".join(notes)
    return table_row(
        "malformed SSE and event streams: hand vectors",
        figure,
        "one transcript whatever the split; feed never raises; finish raises only an "
        "ApiError; buffered <= max_event_bytes (event stream: + the last read)",
        not dependent and not problems and not over,
    )


def _rechunking(ctx: Context) -> Row:
    results = properties(ctx.n(60, 2000), ctx.seed, shrink=ctx.tier == "full")
    failed = [r for r in results if r.failure is not None]
    parts = [
        f"{r.name} ({r.examples} examples): "
        + ("holds" if r.failure is None else f"FAILS: {r.failure[:220]}")
        for r in results
    ]
    return table_row(
        "malformed SSE and event streams: hypothesis rechunking",
        f"{len(results) - len(failed)} of {len(results)} properties hold. " + "; ".join(parts),
        "every property holds (identical transcripts for any split of valid and hostile "
        "streams, SSEDecoder = the WHATWG reference with its documented bound, buffered "
        "within the bound)",
        not failed,
    )


def _seed_corpus(directory: Path) -> int:
    directory.mkdir(parents=True, exist_ok=True)
    seeds: list[bytes] = []
    for selector, folders in ((0, SSE_KINDS), (1, (BEDROCK,)), (2, ("openai",))):
        for folder in folders:
            for path in sorted((FIXTURES / folder).glob("*.raw")):
                seeds.append(frame_input(selector, SMALL, 7, path.read_bytes()[:16000]))
    rng = random.Random(0)
    for vector in sse_vectors(rng):
        if len(vector.data) <= 16000:
            seeds.append(frame_input(0, SMALL, 3, vector.data))
            seeds.append(frame_input(2, SMALL, 5, vector.data))
    for vector in eventstream_vectors(rng):
        if len(vector.data) <= 16000:
            seeds.append(frame_input(1, SMALL, 3, vector.data))
    for n, seed in enumerate(seeds):
        (directory / f"seed-{n:03d}").write_bytes(seed)
    return len(seeds)


async def _atheris(ctx: Context) -> Row:
    home = ctx.home("fuzz")
    corpus, artifacts, stats = home / "corpus", home / "artifacts", home / "stats.json"
    seeds = _seed_corpus(corpus)
    runs, seconds = ctx.n(2_000, 200_000), ctx.n(30, 60)
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "bench.resilience.protocol_fuzz",
        "--runs",
        str(runs),
        "--seconds",
        str(seconds),
        "--stats",
        str(stats),
        "--artifacts",
        str(artifacts),
        "--seed",
        str(ctx.seed),
        str(corpus),
        cwd=ROOT,
        stdout=asyncio.subprocess.DEVNULL,
        stderr=asyncio.subprocess.PIPE,
    )
    try:
        _, err = await asyncio.wait_for(proc.communicate(), seconds + 120)
    except TimeoutError:
        proc.kill()
        await proc.wait()
        err = b"(killed: no end after the time budget)"
    log = err.decode(errors="replace")
    (home / "fuzz.log").write_text(log)
    done = re.search(r"stat::number_of_executed_units: (\d+)", log)
    executed = int(done.group(1)) if done else 0
    crashes = len(list(artifacts.glob("crash-*"))) + len(list(artifacts.glob("timeout-*")))
    if proc.returncode != 0 and not crashes:
        crashes = 1
    doc: dict[str, Any] = json.loads(stats.read_text()) if stats.exists() else {"decoders": {}}
    crash_note = ""
    if crashes:
        crash_note = f" (the process: {_replay(sorted(artifacts.glob('*-*'))[:1])})"
    unexpected: dict[str, dict[str, Any]] = doc.get("unexpected", {})
    if unexpected:
        crashes += sum(e["count"] for e in unexpected.values())
        crash_note += (
            " ("
            + "; ".join(
                f"{kind} in {e['count']} inputs: {e['message'][:80]}, first on {e['first'][:64]}..."
                for kind, e in unexpected.items()
            )
            + ")"
        )
    parts, over_cap, dependent = [], 0, 0
    for name, entry in doc["decoders"].items():
        worst = entry["worst"]
        split = entry["split_dependent"]
        over_cap += entry["over_cap"]
        dependent += split["long_line"] + split["other"]
        part = (
            f"{name}: {entry['inputs']} inputs, worst buffered {worst['buffered']} of cap "
            f"{worst['cap']}, over the cap in {entry['over_cap']}, split-dependent in "
            f"{split['long_line'] + split['other']}"
        )
        if split["long_line"] or split["other"]:
            part += f" ({split['other']} without a line longer than the bound)"
        if entry.get("flush_too_large"):
            part += f", flush() raised EventTooLargeError in {entry['flush_too_large']}"
        parts.append(part)
    return table_row(
        "malformed SSE and event streams: atheris",
        f"{executed} runs from {seeds} seeds ({ctx.n(2_000, 200_000)} runs or {seconds} s): "
        f"{crashes} crashes (inputs raising an unexpected exception){crash_note}; "
        + "; ".join(parts),
        "0 crashes (only the expected exceptions), buffered within its cap, the same "
        "result for the input whole and split",
        executed > 0 and crashes == 0 and over_cap == 0 and dependent == 0,
    )


def _replay(paths: list[Path]) -> str:
    """What a crash artifact raises when the target runs it here, and the input."""
    if not paths:
        return "no artifact; see the libFuzzer output"
    data = paths[0].read_bytes()
    try:
        FuzzTarget(None, 1).one(data)
    except Exception as exc:
        frames = traceback.extract_tb(exc.__traceback__)
        where = next(
            (
                f"{Path(f.filename).name}:{f.lineno}"
                for f in reversed(frames)
                if "sluice" in f.filename
            ),
            "?",
        )
        return (
            f"{type(exc).__name__}: {str(exc)[:90]} at {where}, on the {len(data)}-byte input "
            f"{data[:48].hex()}..."
        )
    return f"{paths[0].name} does not fail when replayed ({len(data)} bytes)"


async def malformed_streams(ctx: Context) -> list[Row]:
    """Every stream translator against hostile bytes: hand vectors, hypothesis, atheris."""
    return [_hand_vectors(ctx), _rechunking(ctx), await _atheris(ctx)]
