"""Router.complete (sluice/routing/router.py) on whole answers, over the fake transport:
the body bound, an empty body, the choices asked for, the error body's bound."""

from __future__ import annotations

import json

import pytest

from sluice.errors import UpstreamError
from sluice.providers.base import Repair
from sluice.routing.attempts import AttemptRecord
from tests.support.fake_openai import completion
from tests.support.fake_transport import ScriptedResponse, connection
from tests.support.routing import failing, plan, request, rows, setup

A = connection("a")


def answer_body(indices: list[int]) -> bytes:
    """An OpenAI completion whose choices carry these indices."""
    doc = completion("x")
    doc["choices"] = [{**doc["choices"][0], "index": i} for i in indices]
    return json.dumps(doc).encode()


@pytest.mark.parametrize(
    ("n", "indices", "kept", "repairs"),
    [
        (None, [0], [0], []),
        (None, [0, 1], [0], [Repair("choice_dropped", 1)]),
        (2, [1, 0], [1, 0], []),
        (2, [0, 0, 5], [0], [Repair("choice_dropped", 0), Repair("choice_dropped", 5)]),
    ],
    ids=["one", "extra-dropped", "two-in-upstream-order", "repeat-and-out-of-range"],
)
async def test_complete_keeps_the_choices_asked_for(
    n: int | None, indices: list[int], kept: list[int], repairs: list[Repair]
) -> None:
    body = ScriptedResponse([answer_body(indices)])
    _, _, router = setup({"a": [body]})
    done = await router.complete(request(stream=False, n=n), plan(A), [])
    assert [c.index for c in done.result.choices] == kept
    assert done.result.repairs == repairs
    assert done.result.usage is not None
    assert (done.result.usage.prompt_tokens, done.result.usage.completion_tokens) == (10, 5)
    assert (body.released, body.closed, body.stall) == (True, False, 120.0)


TOO_LARGE = "The provider's answer is larger than {limit} bytes."
NO_CHOICE = "The provider's response has no choice the request asked for."


@pytest.mark.parametrize(
    ("steps", "limit_delta", "error", "released", "closed"),
    [
        ([answer_body([0])], -1, ("upstream_response_too_large", TOO_LARGE), False, True),
        ([answer_body([0])], 0, None, True, False),
        ([], 0, ("upstream_empty", "The provider sent an empty response."), True, False),
        ([answer_body([3])], 0, ("upstream_empty", NO_CHOICE), True, False),
    ],
    ids=["one-byte-too-large", "exactly-the-limit", "empty", "no-choice-asked-for"],
)
async def test_complete_checks_the_body(
    steps: list[bytes],
    limit_delta: int,
    error: tuple[str, str] | None,
    released: bool,
    closed: bool,
) -> None:
    limit = len(answer_body([0])) + limit_delta
    body = ScriptedResponse(steps)
    _, _, router = setup({"a": [body]}, body_bytes=limit)
    records: list[AttemptRecord] = []
    if error is None:
        await router.complete(request(stream=False), plan(A), records)
        assert rows(records) == ["primary a served"]
    else:
        with pytest.raises(UpstreamError) as caught:
            await router.complete(request(stream=False), plan(A), records)
        assert (caught.value.code, caught.value.message) == (error[0], error[1].format(limit=limit))
        assert rows(records) == [f"primary a upstream_error {error[0]}"]
    assert body.body_limit == limit + 1  # one byte more than allowed tells "too large"
    assert (body.released, body.closed) == (released, closed)


async def test_a_whole_answer_fails_over_like_a_stream() -> None:
    second = ScriptedResponse.json(completion("from b"))
    transport, _, router = setup({"a": [failing(503)], "b": [second]})
    records: list[AttemptRecord] = []
    done = await router.complete(request(stream=False), plan(A, connection("b")), records)
    assert done.attempt.target.connection.id == "b"
    assert done.result.choices[0].message.content == "from b"
    assert rows(records) == [
        "primary a service_unavailable upstream_overloaded",
        "standby_a b served",
    ]
    assert [s.body.get("stream") for s in transport.sent] == [None, None]


async def test_an_error_body_is_read_up_to_its_bound() -> None:
    body = failing(500, "x" * 100)
    _, _, router = setup({"a": [body]}, error_body_bytes=10)
    with pytest.raises(UpstreamError) as caught:
        await router.complete(request(stream=False), plan(A), [])
    assert body.body_limit == 10
    assert body.closed
    assert caught.value.message == "The provider failed (HTTP 500): The provider answered HTTP 500."
