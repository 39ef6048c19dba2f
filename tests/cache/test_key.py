"""Which requests are the same (docs/cache.md#what-is-the-same-request): what is left
out of a cache key does not change it, what changes an answer does, and spellings
of one thing are one key."""

from __future__ import annotations

from typing import Any

import msgspec
import pytest

from sluice.cache.key import cache_key
from sluice.routing.plan import Plan
from sluice.wire.chat import ChatRequest
from tests.routing.test_capabilities import plan

BASE: dict[str, Any] = {
    "model": "t/smart",
    "stream": True,
    "max_tokens": 100,
    "messages": [{"role": "user", "content": "What is the answer?"}],
}
PLAN = plan("t/smart")


def key(doc: dict[str, Any], scope: str = "acct_1", served: Plan = PLAN) -> str:
    return cache_key(msgspec.json.decode(msgspec.json.encode(doc), type=ChatRequest), served, scope)


@pytest.mark.parametrize(
    "extra",
    [
        {"stream": False},
        {"stream_options": {"include_usage": True, "resumable": True}},
        {"user": "someone"},
        {"metadata": {"trace": "x"}},
        {"store": True},
        {"service_tier": "flex"},
        {"safety_identifier": "u-1"},
        {"prompt_cache_key": "k"},
        {"models": ["t/plain"]},
        {"temperature": None},  # null is unset
        {"max_tokens": None, "max_completion_tokens": 100},  # one cap, another spelling
    ],
)
def test_what_does_not_change_an_answer_is_left_out(extra: dict[str, Any]) -> None:
    assert key(BASE | extra) == key(BASE)


@pytest.mark.parametrize(
    "extra",
    [
        {"messages": [{"role": "user", "content": "What is the question?"}]},
        {"messages": [{"role": "system", "content": "Be brief."}, *BASE["messages"]]},
        {"temperature": 0.2},
        {"top_p": 0.5},
        {"seed": 7},
        {"max_tokens": 101},
        {"stop": ["\n"]},
        {"n": 2},
        {"response_format": {"type": "json_object"}},
        {"reasoning_effort": "high"},
        {"tools": [{"type": "function", "function": {"name": "f", "parameters": {}}}]},
    ],
)
def test_what_changes_an_answer_changes_the_key(extra: dict[str, Any]) -> None:
    assert key(BASE | extra) != key(BASE)


def test_the_scope_and_the_model_served_are_in_the_key() -> None:
    assert key(BASE, scope="acct_2") != key(BASE)
    assert key(BASE, scope="global") != key(BASE)
    assert key(BASE | {"model": "t/plain"}, served=plan("t/plain")) != key(BASE)


def test_one_stop_sequence_is_the_list_of_it() -> None:
    assert key(BASE | {"stop": "\n"}) == key(BASE | {"stop": ["\n"]})
