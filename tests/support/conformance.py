"""The shape every provider's normalized stream must have (STYLE habit 4)."""

from __future__ import annotations

from typing import Any

FINISH = {"stop", "length", "tool_calls", "content_filter"}


def assert_conforms(lines: list[dict[str, Any]]) -> None:
    """``lines``: a transcript from :func:`tests.support.transcript.transcript`."""
    started: set[int] = set()
    finished: dict[int, str] = {}
    calls: dict[tuple[int, int], str] = {}
    for line in lines[:-1]:
        (choice,) = line["choices"]
        index, delta, finish = choice["index"], choice["delta"], choice["finish_reason"]
        assert index not in finished, f"chunk after finish for choice {index}"
        if index not in started:
            assert delta == {"role": "assistant", "content": ""} and finish is None
            started.add(index)
            continue
        assert "role" not in delta
        if finish is not None:
            assert delta == {} and finish in FINISH
            finished[index] = finish
            continue
        assert delta, "empty delta without finish_reason"
        for call in delta.get("tool_calls", []):
            key = (index, call["index"])
            if key not in calls:
                assert set(call) == {"index", "id", "type", "function"}
                assert call["type"] == "function" and call["id"]
                assert call["function"].get("arguments") == "" and call["function"].get("name")
                calls[key] = call["id"]
            else:
                assert set(call) == {"index", "function"}
                assert set(call["function"]) == {"arguments"} and call["function"]["arguments"]
    end = lines[-1]
    if end["end"] == "complete":
        assert started and set(finished) == started
        for index, reason in finished.items():
            if any(i == index for i, _ in calls) and reason != "length":
                assert reason == "tool_calls"
    assert len(set(calls.values())) == len(calls), "tool-call ids must be unique"
