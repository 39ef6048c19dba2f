"""An atheris (libFuzzer) target for the upstream stream decoders.

    python -m bench.resilience.protocol_fuzz --runs N [--seconds S] [--stats FILE]
        [--artifacts DIR] [--seed K] [--raise] [CORPUS_DIR ...]

One input is ``selector, bound (2 bytes), split seed, stream``: the selector picks
:class:`~sluice.wire.sse.SSEDecoder`, :class:`~sluice.wire.eventstream.EventStreamDecoder`
or the OpenAI stream translator, built with a bound of 16 to 4096 bytes; the stream is
fed in pieces of 1 to 64 bytes drawn from the split seed. Inside the target:

* an exception other than the expected ones is a crash: recorded in ``--stats`` by
  its type and the line of sluice it came from (count, message, first input), and the
  run goes on; with ``--raise`` it ends the run instead (libFuzzer saves the input
  under ``--artifacts``). Expected: ``SSEDecoder.feed`` may raise only
  ``EventTooLargeError`` (and must keep raising it afterwards), ``flush`` nothing;
  ``EventStreamDecoder.next_message`` only ``EventStreamError`` or
  ``EventTooLargeError`` (and stays failed); the translator's ``feed`` nothing and its
  ``finish`` only an ``ApiError``;
* ``buffered`` is compared with its documented cap after every piece (SSE: the bound;
  event stream: the bound plus the last read) and the same stream fed whole is
  compared with the split one. These two are recorded, not raised, so that one known
  finding does not end the run: ``--stats`` (JSON, rewritten every 2 seconds, at every
  new worst case and on the last run) has the counts, the worst ``buffered`` against its cap and
  the first input of each kind, for the row to judge.

atheris ends the process itself when the runs (``-runs``) or the time
(``-max_total_time``) are used up; libFuzzer's final stats (stderr) give the runs.
"""

from __future__ import annotations

import argparse
import importlib
import json
import random
import sys
import time
import traceback
from pathlib import Path
from typing import Any

SELECTORS = ("sse", "eventstream", "openai")


def split(stream: bytes, key: int) -> list[bytes]:
    rng = random.Random(key)
    pieces, at = [], 0
    while at < len(stream):
        step = rng.randint(1, 64)
        pieces.append(stream[at : at + step])
        at += step
    return pieces


def _long_line(stream: bytes, bound: int) -> bool:
    """Whether a line of the SSE stream is longer than the bound (a line the decoder
    bounds only when it arrives in more than one read: a known finding)."""
    if stream.startswith(b"\xef\xbb\xbf"):
        stream = stream[3:]
    lines = stream.replace(b"\r\n", b"\n").replace(b"\r", b"\n").split(b"\n")
    return max(map(len, lines)) > bound


def frame_input(selector: int, bound: int, key: int, stream: bytes) -> bytes:
    """An input of this target (the seed corpus is written with it)."""
    return bytes([selector]) + (bound - 16).to_bytes(2, "big") + bytes([key]) + stream


class Target:
    def __init__(self, stats: Path | None, runs: int, *, raise_unexpected: bool = False) -> None:
        from sluice.errors import ApiError
        from sluice.frontdoors.chat import decode_chat_request
        from sluice.providers.registry import AdapterRegistry
        from sluice.providers.sse_stream import SSEStreamTranslator
        from sluice.wire.bounds import EventTooLargeError
        from sluice.wire.eventstream import EventStreamDecoder, EventStreamError
        from sluice.wire.sse import SSEDecoder

        self._api_error = ApiError
        self._too_large = EventTooLargeError
        self._es_error = EventStreamError
        self._sse = SSEDecoder
        self._es = EventStreamDecoder
        self._registry = AdapterRegistry
        self._sse_translator = SSEStreamTranslator
        body = b'{"model":"m","stream":true,"messages":[{"role":"user","content":"x"}]}'
        self._request = decode_chat_request(body)
        self._stats_path = stats
        self._raise = raise_unexpected
        self.unexpected: dict[str, dict[str, Any]] = {}
        self._runs = runs
        self._written = time.monotonic()
        self.calls = 0
        self.inputs = 0
        self.stats: dict[str, Any] = {
            name: {
                "inputs": 0,
                "max_buffered": 0,
                "worst": {"buffered": 0, "cap": 1, "ratio": 0.0},
                "over_cap": 0,
                "split_dependent": {"long_line": 0, "other": 0},
                "flush_too_large": 0,
                "first_over_cap": None,
                "first_split_dependent": {"long_line": None, "other": None},
            }
            for name in SELECTORS
        }

    # -- the target ------------------------------------------------------------------------

    def one(self, data: bytes) -> None:
        self.calls += 1
        if self.calls >= self._runs or time.monotonic() - self._written > 2:
            self.write()  # atheris ends the process after the last run: no later chance
        if len(data) < 4:
            return
        if self._raise:
            self._one(data)
            return
        try:
            self._one(data)
        except Exception as exc:  # an unexpected exception: recorded, the run goes on
            self._unexpected(exc, data)

    def _unexpected(self, exc: Exception, data: bytes) -> None:
        frames = traceback.extract_tb(exc.__traceback__)
        inside = [f for f in frames if "sluice" in f.filename] or frames
        where = f"{Path(inside[-1].filename).name}:{inside[-1].lineno}" if inside else "?"
        kind = f"{type(exc).__name__} at {where}"
        entry = self.unexpected.setdefault(
            kind, {"count": 0, "message": str(exc)[:200], "first": data[:300].hex()}
        )
        entry["count"] += 1
        if entry["count"] == 1:
            self.write()

    def _one(self, data: bytes) -> None:
        name = SELECTORS[data[0] % len(SELECTORS)]
        bound = 16 + int.from_bytes(data[1:3], "big") % 4081
        stream = data[4:]
        pieces = split(stream, data[3])
        if name == "sse":
            split_result = self._sse_run(pieces, bound, data)
            whole = self._sse_run([stream], bound, None)
        elif name == "eventstream":
            split_result = self._es_run(pieces, bound, data)
            whole = self._es_run([stream], bound, None)
        else:
            split_result = self._openai_run(pieces, bound, data)
            whole = self._openai_run([stream], bound, None)
        entry = self.stats[name]
        entry["inputs"] += 1
        if split_result != whole:
            kind = "long_line" if name != "eventstream" and _long_line(stream, bound) else "other"
            entry["split_dependent"][kind] += 1
            if entry["first_split_dependent"][kind] is None:
                entry["first_split_dependent"][kind] = data[:300].hex()
                self.write()
        self.inputs += 1

    def _note(self, name: str, held: int, cap: int, data: bytes | None) -> None:
        if data is None:
            return
        entry = self.stats[name]
        entry["max_buffered"] = max(entry["max_buffered"], held)
        ratio = held / cap
        if ratio > entry["worst"]["ratio"]:
            entry["worst"] = {"buffered": held, "cap": cap, "ratio": round(ratio, 4)}
            if held > cap:
                self.write()
        if held > cap:
            entry["over_cap"] += 1
            if entry["first_over_cap"] is None:
                entry["first_over_cap"] = data[:300].hex()
                self.write()

    def _sse_run(self, pieces: list[bytes], bound: int, data: bytes | None) -> Any:
        decoder = self._sse(bound)
        events: list[Any] = []
        for piece in pieces:
            try:
                events += decoder.feed(piece)
            except self._too_large as exc:
                events += exc.decoded
                try:
                    decoder.feed(b"data: more\n\n")
                except self._too_large:
                    pass
                else:
                    raise AssertionError("SSEDecoder decoded again after failing") from None
                return events, "too large"
            self._note("sse", decoder.buffered, bound, data)
        try:
            events += decoder.flush()
        except self._too_large as exc:  # an unfinished data line took the event past it
            if data is not None:
                self.stats["sse"]["flush_too_large"] += 1
            return events + list(exc.decoded), "too large at the end"
        return events, "ok"

    def _es_run(self, pieces: list[bytes], bound: int, data: bytes | None) -> Any:
        decoder = self._es(bound)
        messages: list[Any] = []
        for piece in pieces:
            decoder.feed(piece)
            try:
                while (message := decoder.next_message()) is not None:
                    messages.append(message)
            except (self._es_error, self._too_large) as exc:
                try:
                    decoder.next_message()
                except self._es_error:
                    pass
                else:
                    raise AssertionError("EventStreamDecoder decoded again after failing") from None
                return messages, type(exc).__name__
            self._note("eventstream", decoder.buffered, bound + len(piece), data)
        return messages, "ok"

    def _openai_run(self, pieces: list[bytes], bound: int, data: bytes | None) -> Any:
        translator = (
            self._registry(lambda p: p + "_1", bound).adapter("openai").stream(self._request)
        )
        assert isinstance(translator, self._sse_translator)
        out: list[Any] = []
        for piece in pieces:
            out += translator.feed(piece)  # must never raise
            self._note("openai", translator._sse.buffered, bound, data)
            if translator.failure is not None:
                break
        try:
            out += translator.finish()
            end: Any = "complete"
        except self._api_error as exc:
            end = (exc.type, exc.code)
        return repr(out), end, repr(translator.usage)

    def write(self) -> None:
        self._written = time.monotonic()
        if self._stats_path is not None:
            doc = {
                "calls": self.calls,
                "inputs": self.inputs,
                "decoders": self.stats,
                "unexpected": self.unexpected,
            }
            self._stats_path.write_text(json.dumps(doc, indent=1))


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.resilience.protocol_fuzz")
    parser.add_argument("--runs", type=int, default=2000)
    parser.add_argument("--seconds", type=int, default=60)
    parser.add_argument("--stats", type=Path, default=None)
    parser.add_argument("--artifacts", type=Path, default=Path("."))
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument(
        "--raise",
        dest="raise_unexpected",
        action="store_true",
        help="let an unexpected exception end the run (libFuzzer saves the input)",
    )
    parser.add_argument("corpus", nargs="*", type=Path)
    args = parser.parse_args()
    atheris: Any = importlib.import_module("atheris")
    with atheris.instrument_imports(include=["sluice.wire", "sluice.providers"]):
        importlib.import_module("sluice.wire.sse")
        importlib.import_module("sluice.wire.eventstream")
        importlib.import_module("sluice.providers.openai")
    target = Target(args.stats, args.runs, raise_unexpected=args.raise_unexpected)
    target.write()
    args.artifacts.mkdir(parents=True, exist_ok=True)
    atheris.Setup(
        [
            sys.argv[0],
            f"-runs={args.runs}",
            f"-max_total_time={args.seconds}",
            "-max_len=16384",
            f"-seed={args.seed}",
            "-print_final_stats=1",
            f"-artifact_prefix={args.artifacts}/",
            *(str(c) for c in args.corpus),
        ],
        target.one,
    )
    atheris.Fuzz()


if __name__ == "__main__":
    main()
