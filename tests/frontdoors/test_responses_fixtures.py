"""Every provider's recordings → our ``/v1/responses`` stream, as a client receives it.

Each ``tests/fixtures/<provider>/<case>.raw`` runs through its provider's translator
into one :class:`ResponsesStreamEncoder` (no seal: sealed reasoning differs per call),
ending in ``response.completed`` / ``.incomplete``, or ``response.failed`` when the
translator fails; a failure before anything the client must see is the door's
``error`` event alone, as the gateway sends it after its keep-alives. Fed whole, byte by
byte and at random splits the bytes must be the same and equal
``tests/fixtures/responses/<provider>/<case>.sse`` (``SLUICE_UPDATE_FIXTURES=1`` rewrites
it). Each must be well-formed Responses SSE (every item's lifecycle in order), and the
official openai SDK, unchanged, must fold it: its final response holds what the
translator produced, with the usage the door was told.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any, NamedTuple, cast

import openai
import pytest
from openai.lib.streaming.responses import (
    ResponseFunctionCallArgumentsDeltaEvent,
    ResponseTextDeltaEvent,
    ResponseTextDoneEvent,
)
from openai.types.responses import (
    Response,
    ResponseErrorEvent,
    ResponseFailedEvent,
    ResponseFunctionToolCall,
    ResponseIncompleteEvent,
    ResponseOutputMessage,
    ResponseReasoningItem,
)

from sluice.accounts.sealing import AccountSeal
from sluice.frontdoors.responses.decode import decode_responses_request
from sluice.frontdoors.responses.door import ResponsesDoor
from sluice.frontdoors.responses.echo import Echo
from sluice.frontdoors.responses.encode import ResponsesStreamEncoder
from sluice.frontdoors.responses.memory import ResponseMemory
from sluice.frontdoors.responses.reasoning import ReasoningSeal
from sluice.storage.responses import ResponseStore
from sluice.storage.writer import WriteBehind
from tests.frontdoors.recordings import (
    FAILING,
    IDENTITY,
    IDS,
    Translated,
    assert_every_split_gives_the_golden_bytes,
    events,
    golden,
    produced,
    sse_client,
    translated,
)
from tests.providers.test_fixtures import CASES

INPUT = "Say hello"
REQUEST = decode_responses_request(
    json.dumps({"model": "m", "stream": True, "input": INPUT}).encode()
)
DOOR = ResponsesDoor(
    # never reached: nothing is stored here
    ResponseMemory(cast("ResponseStore", None), cast("WriteBehind", None)),
    ReasoningSeal(AccountSeal(bytes(32))),
    lambda: 1700000000.0,
)
INCOMPLETE = {"length": "max_output_tokens", "content_filter": "content_filter"}
"""The finish reasons that end a response ``incomplete``, and the reason it gives."""
ENDS = {"completed", "incomplete", "failed"}
LIFECYCLES = {
    "message": [
        "content_part.added",
        "output_text.delta*",
        "output_text.done",
        "content_part.done",
    ],
    "function_call": ["function_call_arguments.delta*", "function_call_arguments.done"],
    "reasoning": [
        "reasoning_summary_part.added",
        "reasoning_summary_text.delta*",
        "reasoning_summary_text.done",
        "reasoning_summary_part.done",
    ],
}
"""Per item type, its events between ``output_item.added`` and ``.done`` (``*``: any
number of them)."""


class Served(NamedTuple):
    body: bytes  # what the client receives
    run: Translated  # what the translator produced, and the door was told at the end


def served(kind: str, pieces: list[bytes]) -> Served:
    """The recording fed to its translator in ``pieces``, through the Responses door."""
    run = translated(kind, REQUEST, pieces)
    if run.error is not None and not run.shown:
        return Served(DOOR.error_event(run.error, None), run)
    encoder = ResponsesStreamEncoder(IDENTITY, Echo(REQUEST))
    out = [encoder.events(batch) for batch in run.batches]
    if run.error is not None:
        out.append(encoder.failure(run.error, run.end))
    else:
        out.append(encoder.ending(run.end))
    return Served(b"".join(out), run)


def expected_status(run: Translated) -> str:
    """How the response must end: ``error`` for the door's error event alone."""
    if run.error is not None:
        return "failed" if run.shown else "error"
    last = next((c.finish_reason for c in reversed(run.chosen) if c.finish_reason), None)
    return "incomplete" if last in INCOMPLETE else "completed"


@pytest.mark.parametrize(("kind", "path"), CASES, ids=IDS)
def test_whole_bytewise_and_random_splits_give_the_golden_bytes(kind: str, path: Path) -> None:
    assert_every_split_gives_the_golden_bytes("responses", path, lambda p: served(kind, p).body)


def lifecycle(kind: str) -> re.Pattern[str]:
    steps = ["output_item.added", *LIFECYCLES[kind], "output_item.done"]
    return re.compile(
        "".join(
            f"(?:{re.escape(step[:-1])} )*" if step.endswith("*") else f"{re.escape(step)} "
            for step in steps
        )
    )


def assert_item(stream: list[tuple[str, dict[str, Any]]]) -> dict[str, Any]:
    """One output item's events, from ``output_item.added`` on: in its lifecycle's order,
    each naming the item, the deltas whole in the ``.done`` events and in the item at
    its end. Returns the item as ``output_item.done`` carried it."""
    added = stream[0][1]["item"]
    names = "".join(name.removeprefix("response.") + " " for name, _ in stream)
    assert lifecycle(added["type"]).fullmatch(names), (added["type"], names)
    done = stream[-1][1]["item"]
    assert all(p["item_id"] == added["id"] for _, p in stream[1:-1])
    assert all(p.get("content_index", 0) == p.get("summary_index", 0) == 0 for _, p in stream)
    whole = "".join(p["delta"] for name, p in stream if name.endswith(".delta"))
    by_name = {name.removeprefix("response."): p for name, p in stream}
    assert (done["id"], done["type"]) == (added["id"], added["type"])
    if added["type"] == "message":
        assert (added["status"], added["content"]) == ("in_progress", [])
        assert done["status"] == "completed"
        assert by_name["output_text.done"]["text"] == whole
        assert by_name["content_part.done"]["part"]["text"] == whole
        assert [(c["type"], c["text"]) for c in done["content"]] == [("output_text", whole)]
    elif added["type"] == "function_call":
        arguments = by_name["function_call_arguments.done"]
        assert (added["arguments"], arguments["arguments"], done["arguments"]) == ("", whole, whole)
        assert arguments["name"] == added["name"] == done["name"]
        assert added["call_id"] == done["call_id"]
        assert (added["status"], done["status"]) == ("in_progress", "completed")
    else:
        assert by_name["reasoning_summary_text.done"]["text"] == whole
        assert by_name["reasoning_summary_part.done"]["part"]["text"] == whole
        assert [s["text"] for s in done["summary"]] == [whole]
    return cast("dict[str, Any]", done)


def assert_well_formed(body: bytes) -> str:
    """Responses SSE: ``sequence_number`` 0, 1, 2 …; ``response.created`` and
    ``.in_progress`` with no output yet; items added at output_index 0, 1, … each
    through its lifecycle (items may interleave); then exactly one end whose response
    holds every item as it was done. Returns how it ended (``error``: the error event
    alone)."""
    stream = events(body)
    assert [p["sequence_number"] for _, p in stream] == list(range(len(stream)))
    names = [name for name, _ in stream]
    if names == ["error"]:
        return "error"
    assert names[:2] == ["response.created", "response.in_progress"]
    assert all(p["response"]["output"] == [] for _, p in stream[:2])
    assert all(p["response"]["status"] == "in_progress" for _, p in stream[:2])
    end = names[-1].removeprefix("response.")
    assert end in ENDS and not {"error", *(f"response.{e}" for e in ENDS)} & set(names[:-1])
    items: list[list[tuple[str, dict[str, Any]]]] = []
    for name, payload in stream[2:-1]:
        if name == "response.output_item.added":
            assert payload["output_index"] == len(items)
            items.append([])
        assert 0 <= payload["output_index"] < len(items), f"{name} before its item"
        items[payload["output_index"]].append((name, payload))
    response = stream[-1][1]["response"]
    assert response["status"] == end and response["id"] == stream[0][1]["response"]["id"]
    assert response["output"] == [assert_item(item) for item in items]
    assert len({item["id"] for item in response["output"]}) == len(items)
    return end


@pytest.mark.parametrize(("kind", "path"), CASES, ids=IDS)
def test_every_stream_is_well_formed_responses_sse(kind: str, path: Path) -> None:
    body, run = served(kind, [path.read_bytes()])
    ended = assert_well_formed(body)
    assert ended == expected_status(run)
    assert (ended in ("failed", "error")) == (path.stem in FAILING)


def sdk(body: bytes) -> openai.OpenAI:
    """The SDK, reading ``body`` as the answer to whatever it asks."""
    client = sse_client(body, "/v1/responses")
    return openai.OpenAI(
        api_key="k", base_url="http://sluice.test/v1", max_retries=0, http_client=client
    )


def received(response: Response) -> dict[str, Any]:
    """What the response holds: its text, its reasoning summary, each function call."""
    output = response.output
    messages = [i for i in output if isinstance(i, ResponseOutputMessage)]
    summaries = [s for i in output if isinstance(i, ResponseReasoningItem) for s in i.summary]
    calls = [i for i in output if isinstance(i, ResponseFunctionToolCall)]
    return {
        "text": "".join(c.text for m in messages for c in m.content if c.type == "output_text"),
        "thinking": "".join(s.text for s in summaries),
        "tools": [(c.call_id, c.name, json.loads(c.arguments or "{}")) for c in calls],
    }


def folded(seen: list[Any]) -> dict[int, str]:
    """Per output index, the text or arguments the SDK accumulated from the deltas."""
    out: dict[int, str] = {}
    for event in seen:
        if isinstance(event, ResponseTextDeltaEvent | ResponseFunctionCallArgumentsDeltaEvent):
            assert event.snapshot.endswith(event.delta)
            assert event.snapshot.startswith(out.get(event.output_index, ""))
            out[event.output_index] = event.snapshot
        elif isinstance(event, ResponseTextDoneEvent):
            assert event.text == out.get(event.output_index, "")
    return out


def accumulated(client: openai.OpenAI, status: str) -> tuple[Response, dict[int, str]]:
    """The SDK's final response (the last event's for a response that did not
    complete: the SDK has none then) and what it folded from the deltas."""
    with client.responses.stream(model="m", input=INPUT) as stream:
        seen = list(stream)
        if status == "completed":
            return stream.get_final_response(), folded(seen)
        with pytest.raises(RuntimeError, match=r"response\.completed"):
            stream.get_final_response()
    last = seen[-1]
    assert isinstance(last, ResponseIncompleteEvent | ResponseFailedEvent)
    return last.response, folded(seen)


@pytest.mark.parametrize(("kind", "path"), CASES, ids=IDS)
def test_the_openai_sdk_folds_every_stream(kind: str, path: Path) -> None:
    _, run = answer = served(kind, [path.read_bytes()])
    body = golden("responses", path, answer.body)
    status, error = expected_status(run), run.error
    with sdk(body) as client:
        if status == "error":
            assert error is not None
            (only,) = client.responses.create(model="m", input=INPUT, stream=True)
            assert isinstance(only, ResponseErrorEvent)
            assert (only.code, only.message) == (error.code or error.type, error.message)
            return
        response, deltas = accumulated(client, status)
    translator = produced(run.chosen)
    assert received(response) == {k: translator[k] for k in ("text", "thinking", "tools")}
    for index, item in enumerate(response.output):
        if isinstance(item, ResponseOutputMessage):
            assert deltas[index] == "".join(c.text for c in item.content if c.type == "output_text")
        elif isinstance(item, ResponseFunctionToolCall):
            assert deltas.get(index, "") == item.arguments
    assert_ending(response, run, status)


def assert_ending(response: Response, run: Translated, status: str) -> None:
    """Who answered, how it ended (and why), and the usage the door was told."""
    assert (response.id, response.model) == ("resp_fixture", IDENTITY.model)
    assert response.status == status
    if status == "incomplete":
        last = next(c.finish_reason for c in reversed(run.chosen) if c.finish_reason)
        assert response.incomplete_details is not None
        assert response.incomplete_details.reason == INCOMPLETE[last]
    if run.error is not None:
        error = response.error
        assert error is not None
        assert (error.code, error.message) == (run.error.code or run.error.type, run.error.message)
    usage, end = response.usage, run.end.usage
    assert usage is not None
    assert (usage.input_tokens, usage.output_tokens) == (end.prompt_tokens, end.completion_tokens)
    assert usage.total_tokens == end.prompt_tokens + end.completion_tokens
    details = usage.input_tokens_details
    assert details.cached_tokens == end.prompt_tokens_details.cached_tokens
    assert details.cache_write_tokens == run.end.cache_write_tokens
    reasoning = end.completion_tokens_details.reasoning_tokens
    assert usage.output_tokens_details.reasoning_tokens == reasoning
    assert (usage.model_extra or {}).get("cost") == end.cost
