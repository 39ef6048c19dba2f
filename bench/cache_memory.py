"""The response cache's memory per kept answer (docs/cache.md): the Python heap an
:class:`~sluice.cache.store.AnswerStore` holds per answer, beside the JSON bytes it
counts against ``max_bytes``.

    .venv/bin/python -m bench.cache_memory [--answers 10000] [--chunks 20] [--chunk-bytes 16]

Each answer is what the peer kit's upstream streams (``--chunks`` content chunks of
``--chunk-bytes`` characters, then the finish), as the translator hands it over: one
batch per chunk.
"""

from __future__ import annotations

import argparse
import gc
import tracemalloc

from sluice.cache.store import AnswerStore, CachedAnswer
from sluice.core.usage import TokenUsage
from sluice.wire.chunks import Choice, Delta


def _answer(n: int, chunks: int, size: int) -> CachedAnswer:
    text = (str(n) * size)[:size]
    batches = [[[Choice(0, Delta(role="assistant", content=""), None)]]]
    batches += [[[Choice(0, Delta(content=text), None)]] for _ in range(chunks)]
    batches.append([[Choice(0, Delta(), "stop")]])
    return CachedAnswer(
        filled_by=f"req_{n:022d}",
        account_id="acct_bench",
        served_as=[
            "conn_bench",
            "openai-compatible",
            "http://127.0.0.1:9001/v1",
            "fake-model",
            "fake-model",
        ],
        tokens=TokenUsage(prompt_tokens=10, completion_tokens=chunks),
        finish_reason="stop",
        tool_calls=[],
        batches=batches,
        offsets=[i * 0.001 for i in range(len(batches))],
    )


def main(answers: int, chunks: int, size: int) -> None:
    store = AnswerStore.in_memory(1 << 40, 1 << 30, lambda: 0.0)
    gc.collect()
    tracemalloc.start()
    before = tracemalloc.get_traced_memory()[0]
    for n in range(answers):
        store.put(f"{n:064x}", _answer(n, chunks, size), ttl=3600)
    gc.collect()
    held = tracemalloc.get_traced_memory()[0] - before
    tracemalloc.stop()
    print(f"{answers} answers of {chunks} chunks of {size} characters kept")
    print(f"  heap per answer {held / answers:,.0f} bytes (key and bookkeeping included)")
    counted = store.kept.kept_bytes / answers
    print(f"  counted per answer {counted:,.0f} bytes (its JSON, against max_bytes)")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--answers", type=int, default=10_000)
    parser.add_argument("--chunks", type=int, default=20)
    parser.add_argument("--chunk-bytes", type=int, default=16)
    args = parser.parse_args()
    main(args.answers, args.chunks, args.chunk_bytes)
