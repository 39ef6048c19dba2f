"""The replay harness over the recorded corpus (tests/fixtures/sse), every fault, exact
results; and the seed's three faults giving three distinct outcomes."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from sluice.client.events import ErrorInfo, StreamResult, Usage
from sluice.client.replay import FAULTS, Fault, inject, replay, replay_reads

CORPUS = Path(__file__).parent.parent / "fixtures" / "sse"
INJECTED = ErrorInfo("upstream_error", "fault injected by the replay harness", "replay_fault")
ENDED = ErrorInfo(
    "connection_error", "the stream ended after its finish_reason, before [DONE]", "stream_ended"
)
"""What ``no-done`` leaves: every choice finished, only [DONE] missing."""


@dataclass(frozen=True)
class Recording:
    """What the recording holds when replayed as recorded."""

    file: str
    finish: str
    text: str
    reasoning: str = ""
    tools: tuple[tuple[str, Any], ...] = ()
    usage: Usage | None = None


RECORDINGS = (
    Recording(
        "text.sse",
        "stop",
        "Server-sent events are simple.",
        usage=Usage(24, 5, 29),
    ),
    Recording(
        "tool_call.sse",
        "tool_calls",
        "",
        tools=(("get_weather", {"city": "Berlin", "unit": "celsius"}),),
        usage=Usage(80, 19, 99),
    ),
    Recording(
        "parallel_tool_calls.sse",
        "tool_calls",
        "",
        tools=(("get_weather", {"city": "Paris"}), ("get_time", {"tz": "CET"})),
    ),
    Recording(
        "reasoning.sse",
        "stop",
        "2+2 = 4.",
        reasoning="The user asks 2+2.",
        usage=Usage(12, 30, 42, reasoning_tokens=25),
    ),
    Recording(
        "sluice_usage.sse",
        "stop",
        "Hello from Sluice",
        usage=Usage(10, 3, 13, cost=9.5e-6, price_source="list"),
    ),
)


def expected(rec: Recording, fault: Fault | None) -> dict[str, Any]:
    state, error, usage = "complete", None, rec.usage
    finish: str | None = rec.finish
    if fault == "no-done":
        state, error = "incomplete", ENDED
    elif fault == "length":
        state, finish = "truncated", "length"
    elif fault == "error":
        state, finish, error = "error", None, INJECTED
        usage = None  # the usage chunk came at or after the finish, which the fault replaced
    return {
        "state": state,
        "finish_reason": finish,
        "text": rec.text,
        "reasoning": rec.reasoning,
        "tools": rec.tools,
        "usage": usage,
        "error": error,
    }


def observed(result: StreamResult) -> dict[str, Any]:
    return {
        "state": result.state,
        "finish_reason": result.finish_reason,
        "text": result.text,
        "reasoning": result.reasoning,
        "tools": tuple((c.name, c.parsed) for c in result.tool_calls),
        "usage": result.usage,
        "error": result.error,
    }


@pytest.mark.parametrize("fault", [None, *FAULTS], ids=lambda f: f or "as-recorded")
@pytest.mark.parametrize("rec", RECORDINGS, ids=lambda r: r.file.removesuffix(".sse"))
def test_every_recording_under_every_fault(rec: Recording, fault: Fault | None) -> None:
    outcome = replay((CORPUS / rec.file).read_bytes(), fault)
    assert outcome.consistent
    assert observed(outcome.result) == expected(rec, fault)
    assert all(call.valid_json for call in outcome.result.tool_calls)


@pytest.mark.parametrize("fault", ["split", "comment", "crlf"])
@pytest.mark.parametrize("rec", RECORDINGS, ids=lambda r: r.file.removesuffix(".sse"))
def test_harmless_faults_change_nothing_at_all(rec: Recording, fault: Fault) -> None:
    data = (CORPUS / rec.file).read_bytes()
    assert replay(data, fault).result == replay(data).result


def test_the_seed_faults_give_three_distinct_outcomes() -> None:
    data = (CORPUS / "text.sse").read_bytes()
    split, no_done, length = (replay(data, f).result for f in ("split", "no-done", "length"))
    assert (split.state, no_done.state, length.state) == ("complete", "incomplete", "truncated")
    assert split.text == no_done.text == length.text == "Server-sent events are simple."
    assert split.ok and length.ok and not no_done.ok


def test_split_replays_every_cut_and_one_byte_per_read() -> None:
    data = (CORPUS / "sluice_usage.sse").read_bytes()
    patterns = inject(data, "split")
    assert len(patterns) == len(data)  # len - 1 two-read cuts, plus byte by byte
    assert all(b"".join(p) == data for p in patterns)
    assert {len(p[0]) for p in patterns[:-1]} == set(range(1, len(data)))
    assert all(len(piece) == 1 for piece in patterns[-1])


def test_results_compare_whole_so_a_lost_piece_would_show() -> None:
    data = (CORPUS / "text.sse").read_bytes()
    whole = replay_reads((data,))
    assert replay_reads((data[:9], data[9:])) == whole
    assert replay_reads((data[:-20],)) != whole  # the same text, but no [DONE]


def test_recorded_sluice_stream_keeps_its_identity() -> None:
    result = replay((CORPUS / "sluice_usage.sse").read_bytes()).result
    assert (result.request_id, result.model, result.provider) == (
        "req_000003",
        "sluice/demo",
        "demo",
    )
    assert (result.connection, result.route, result.route_name) == ("conn_demo", "primary", None)


def test_unknown_fault_is_refused() -> None:
    with pytest.raises(ValueError, match="unknown fault"):
        inject(b"data: [DONE]\n\n", "reorder")  # type: ignore[arg-type]
