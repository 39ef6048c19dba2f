"""Router.count_tokens (sluice/routing/router.py) over the fake transport: the provider
counts only where its adapter has the ability; otherwise, or when it cannot answer,
nothing is counted and the caller estimates."""

from __future__ import annotations

import msgspec
import pytest

from sluice.core.connection import ConnectionSettings
from sluice.errors import UpstreamError
from tests.support.fake_transport import Answer, ScriptedResponse, connection
from tests.support.routing import failing, plan, request, setup


def counting(conn_id: str) -> ConnectionSettings:
    """A connection whose adapter counts tokens (the Messages API)."""
    return msgspec.structs.replace(connection(conn_id), provider="anthropic")


async def test_the_first_target_that_counts_answers_with_its_count() -> None:
    transport, _, router = setup({"a": [ScriptedResponse.json({"input_tokens": 1234})]})
    counted = await router.count_tokens(request(), plan(counting("a")))
    assert counted is not None and counted[0] == 1234
    assert counted[1].connection.id == "a"
    [sent] = transport.sent
    assert sent.url == "http://a.upstream.test/v1/messages/count_tokens"
    assert sent.body["model"] == "native-a"


async def test_an_adapter_without_the_ability_sends_nothing() -> None:
    transport, _, router = setup({})
    assert await router.count_tokens(request(), plan(connection("a"))) is None
    assert transport.sent == []


@pytest.mark.parametrize(
    "answer",
    [failing(500), ScriptedResponse.json([]), UpstreamError("down")],
    ids=["refused", "malformed", "unreachable"],
)
async def test_a_provider_that_cannot_count_leaves_the_estimate(answer: Answer) -> None:
    transport, _, router = setup({"a": [answer]})
    assert await router.count_tokens(request(), plan(counting("a"))) is None
    assert len(transport.sent) == 1


async def test_a_connection_the_breaker_holds_off_is_not_asked() -> None:
    count = ScriptedResponse.json({"input_tokens": 7})
    transport, _, router = setup({"a": [failing(500)], "b": [count]}, threshold=1)
    with pytest.raises(UpstreamError):
        await router.complete(request(stream=False), plan(connection("a")), [])
    counted = await router.count_tokens(request(), plan(counting("a"), counting("b")))
    assert counted is not None and (counted[0], counted[1].connection.id) == (7, "b")
    assert transport.sent_to() == [("a", False), ("b", False)]
