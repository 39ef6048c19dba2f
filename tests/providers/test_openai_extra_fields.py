"""A connection's ``allow_extra_fields`` on the OpenAI-wire body: our extensions it
names are kept, the request's fields outside the chat wire it names are added as sent,
everything else stays out (providers/openai_request.py)."""

from __future__ import annotations

import json
from typing import Any

import msgspec

from sluice.frontdoors.chat import decode_chat_request
from sluice.providers.openai_request import openai_body

VLLM = frozenset({"min_p", "chat_template_kwargs", "top_k"})
BASE = {"model": "m", "messages": [{"role": "user", "content": "hi"}]}


def sent(allowed: frozenset[str], **fields: Any) -> dict[str, Any]:
    req = decode_chat_request(json.dumps({**BASE, **fields}).encode())
    out: dict[str, Any] = json.loads(msgspec.json.encode(openai_body(req, "native", allowed)))
    return out


EXTRAS = {"min_p": 0.05, "chat_template_kwargs": {"enable_thinking": False}}


def test_allowed_extra_fields_are_sent_as_given() -> None:
    body = sent(VLLM, top_k=40, repetition_penalty=1.1, **EXTRAS)
    assert body == {**BASE, "model": "native", "top_k": 40, **EXTRAS}


def test_without_an_allowance_nothing_extra_is_sent() -> None:
    assert sent(frozenset(), top_k=40, models=["x/y"], **EXTRAS) == {**BASE, "model": "native"}


def test_a_request_without_extras_is_the_struct_itself() -> None:
    req = decode_chat_request(json.dumps(BASE).encode())
    assert not isinstance(openai_body(req, "native", VLLM), msgspec.Raw)


def test_our_native_fields_are_never_an_extra() -> None:
    assert "native" not in sent(frozenset({"native", "min_p"}), min_p=0.1)
