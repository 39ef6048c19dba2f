"""The OpenAI stream translator alone: a 22-event stream fed 2,000 times, best of 7.

Run: ``taskset -c 1 .venv/bin/python bench/translator_cost.py [TREE]``; ``TREE`` is a
checkout to import ``sluice`` from (a ``git worktree`` of another commit, to compare).
"""

from __future__ import annotations

import sys
import time

if len(sys.argv) > 1:
    sys.path.insert(0, sys.argv[1])

from sluice.ids import ordered_id
from sluice.providers.openai_stream import OpenAIStreamTranslator

HEAD = b'data: {"id":"x","object":"chat.completion.chunk","created":1,"model":"m","choices":'
STREAM = [
    HEAD + b'[{"index":0,"delta":{"role":"assistant","content":""},"finish_reason":null}]}\n\n',
    *[HEAD + b'[{"index":0,"delta":{"content":"abcdefghijklmnop"},"finish_reason":null}]}\n\n']
    * 20,
    HEAD + b'[{"index":0,"delta":{},"finish_reason":"stop"}]}\n\ndata: [DONE]\n\n',
]
STREAMS = 2000


def main() -> None:
    best = float("inf")
    for _ in range(7):
        started = time.perf_counter()
        for _ in range(STREAMS):
            translator = OpenAIStreamTranslator(ordered_id)
            for data in STREAM:
                translator.feed(data)
            translator.finish()
        best = min(best, (time.perf_counter() - started) / STREAMS * 1e6)
    print(f"{best:.1f} µs per {len(STREAM)}-event stream")


if __name__ == "__main__":
    main()
