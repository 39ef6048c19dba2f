"""The built-in ``demo`` provider: deterministic answers, no network.

It is a real provider behind the same interface: its upstream is an in-process script
(:class:`DemoUpstream`) that speaks the OpenAI wire format at a configurable pace, and
its bytes go through the same translator as OpenAI's. It honours ``max_tokens``
(finish ``length``), ``stop``, ``n``, and answers with tool calls when the request
offers tools (arguments made up from each tool's JSON schema).

Connection options: ``first_token_ms`` (default 150) and ``token_ms`` (default 20, so
50 tokens/s). The native model ``demo-fast`` runs four times faster. The native model
``demo-embed`` embeds (:mod:`.demo_embed`), answering after ``first_token_ms``.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from typing import Any

import msgspec

from sluice.core.connection import Target
from sluice.core.embedding import EmbedCall
from sluice.core.tokens import estimate_prompt_tokens, tokens_for_chars
from sluice.core.upstream_request import UpstreamRequest
from sluice.errors import ConfigError
from sluice.ids import IdFactory
from sluice.providers.base import EmbedBatch
from sluice.providers.demo_embed import demo_embed_batches
from sluice.providers.openai import OpenAIAdapter
from sluice.wire.chat import ChatRequest, Tool
from sluice.wire.chunks import (
    Choice,
    CompletionChoice,
    Delta,
    FunctionDelta,
    ResponseFunctionCall,
    ResponseMessage,
    ResponseToolCall,
    ToolCallDelta,
)
from sluice.wire.conversation import ToolMessage, UserMessage, message_text
from sluice.wire.sse import DONE_EVENT, data_event

_WORDS = re.compile(r"\S+\s*")
_ARG_PIECE = 12
_ECHO_WORDS = 24
_FAST_FACTOR = 4
_ENCODER = msgspec.json.Encoder()

INTRO = (
    "Hello from Sluice! This answer streams from the built-in demo provider, one token "
    "at a time, so you can watch time to first token and tokens per second. Add a "
    "connection to OpenAI, Anthropic, Gemini, Bedrock, DeepSeek or any "
    "OpenAI-compatible server to get real answers."
)


class DemoOptions(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    first_token_ms: float = 150.0
    token_ms: float = 20.0


def demo_options(raw: Mapping[str, Any]) -> DemoOptions:
    try:
        return msgspec.convert(dict(raw), DemoOptions)
    except msgspec.ValidationError as exc:
        raise ConfigError(f"demo connection options: {exc}") from None


class _Stream(msgspec.Struct):
    """Upstream chunk, OpenAI-shaped."""

    choices: list[Choice]
    id: str = "chatcmpl-demo"
    object: str = "chat.completion.chunk"
    created: int = 0
    model: str = "demo"
    usage: dict[str, int] | msgspec.UnsetType = msgspec.UNSET


class _Completion(msgspec.Struct):
    choices: list[CompletionChoice]
    usage: dict[str, int]
    id: str = "chatcmpl-demo"
    object: str = "chat.completion"
    created: int = 0
    model: str = "demo"


def _sample_value(schema: Any) -> Any:
    if not isinstance(schema, dict):
        return "demo"
    if "enum" in schema and isinstance(schema["enum"], list) and schema["enum"]:
        return schema["enum"][0]
    kind = schema.get("type")
    if kind == "object":
        props = schema.get("properties")
        if not isinstance(props, dict):
            return {}
        return {name: _sample_value(sub) for name, sub in props.items()}
    if kind == "array":
        return [_sample_value(schema.get("items"))]
    return {"integer": 1, "number": 1.5, "boolean": True, "null": None}.get(str(kind), "demo")


def _chosen_tools(req: ChatRequest) -> list[Tool]:
    tools = req.tool_list
    choice = req.tool_choice
    if not tools or choice == "none" or isinstance(req.messages[-1], ToolMessage):
        return []
    if not isinstance(choice, str) and choice is not None and choice is not msgspec.UNSET:
        return [t for t in tools if t.function.name == choice.function.name][:1]
    return tools[:2] if req.parallel_tool_calls is not False else tools[:1]


class _Answer(msgspec.Struct):
    tokens: list[str]
    finish: str
    calls: list[tuple[str, str, str]]  # id, name, arguments


class DemoUpstream:
    """The scripted upstream for one request."""

    def __init__(
        self, req: ChatRequest, native_model: str, options: DemoOptions, new_id: IdFactory
    ) -> None:
        scale = _FAST_FACTOR if native_model.endswith("-fast") else 1
        self._first = options.first_token_ms / 1000 / scale
        self._step = options.token_ms / 1000 / scale
        self._req = req
        self._prompt_tokens = estimate_prompt_tokens(req)
        calls = [
            (
                new_id("call"),
                t.function.name,
                _ENCODER.encode(
                    _sample_value(t.function.parameters or {"type": "object"})
                ).decode(),
            )
            for t in _chosen_tools(req)
        ]
        self._answers = [self._answer(i, calls) for i in range(req.choice_count)]

    def _answer(self, index: int, calls: list[tuple[str, str, str]]) -> _Answer:
        if calls:
            return _Answer([], "tool_calls", calls)
        text = self._text(index)
        finish = "stop"
        for stop in self._req.stop_sequences:
            cut = text.find(stop) if stop else -1
            if cut >= 0:
                text = text[:cut]
        tokens = _WORDS.findall(text)
        ceiling = self._req.output_ceiling
        if ceiling is not None and len(tokens) > ceiling:
            tokens, finish = tokens[:ceiling], "length"
        return _Answer(tokens, finish, [])

    def _text(self, index: int) -> str:
        last = self._req.messages[-1]
        if isinstance(last, ToolMessage):
            return f"The tool answered: {message_text(last)[:200]}"
        users = [m for m in self._req.messages if isinstance(m, UserMessage)]
        said = " ".join(message_text(users[-1]).split()[:_ECHO_WORDS]) if users else ""
        label = f" (choice {index + 1})" if self._req.choice_count > 1 else ""
        return f"{INTRO}{label} You said: {said}" if said else INTRO + label

    def _usage(self) -> dict[str, int]:
        completion = sum(
            len(a.tokens) + sum(tokens_for_chars(len(c[2])) for c in a.calls) for a in self._answers
        )
        return {
            "prompt_tokens": self._prompt_tokens,
            "completion_tokens": completion,
            "total_tokens": self._prompt_tokens + completion,
        }

    def script(self) -> Iterator[tuple[float, bytes]]:
        steps = self._timeline()
        if not self._req.is_stream:
            yield self._first + self._step * (len(steps) - 1), self._completion()
            return
        for number, events in enumerate(steps):
            last = number == len(steps) - 1
            body = b"".join(events) + (self._tail() if last else b"")
            yield (self._first if number == 0 else self._step), body

    def _event(self, index: int, delta: Delta, finish: str | None = None) -> bytes:
        return data_event(_ENCODER.encode(_Stream([Choice(index, delta, finish)])))

    def _timeline(self) -> list[list[bytes]]:
        """Events by time step: the role chunk comes with the first token (step 0), one
        token or argument piece per step after that, finish chunks on the last step."""
        steps: list[list[bytes]] = [[]]
        for i, answer in enumerate(self._answers):
            pieces = [self._event(i, Delta(content=token)) for token in answer.tokens]
            for position, (call_id, name, args) in enumerate(answer.calls):
                first = ToolCallDelta(position, call_id, "function", FunctionDelta(name, ""))
                pieces.append(self._event(i, Delta(tool_calls=[first])))
                pieces.extend(
                    self._event(
                        i,
                        Delta(
                            tool_calls=[
                                ToolCallDelta(
                                    position,
                                    function=FunctionDelta(arguments=args[at : at + _ARG_PIECE]),
                                )
                            ]
                        ),
                    )
                    for at in range(0, len(args), _ARG_PIECE)
                )
            steps[0].append(self._event(i, Delta(role="assistant", content="")))
            while len(steps) < len(pieces):
                steps.append([])
            for number, piece in enumerate(pieces):
                steps[number].append(piece)
        for i, answer in enumerate(self._answers):
            steps[-1].append(self._event(i, Delta(), answer.finish))
        return steps

    def _tail(self) -> bytes:
        usage = _ENCODER.encode(_Stream([], usage=self._usage()))
        return data_event(usage) + DONE_EVENT

    def _completion(self) -> bytes:
        choices = []
        for i, answer in enumerate(self._answers):
            message = ResponseMessage(content="".join(answer.tokens) if answer.tokens else None)
            if answer.calls:
                message.tool_calls = [
                    ResponseToolCall(id=c, function=ResponseFunctionCall(n, a))
                    for c, n, a in answer.calls
                ]
            choices.append(CompletionChoice(i, message, answer.finish))
        return _ENCODER.encode(_Completion(choices, self._usage()))


class DemoAdapter(OpenAIAdapter):
    """Builds an in-process upstream; reads its bytes exactly as OpenAI's."""

    def build_request(self, req: ChatRequest, target: Target) -> UpstreamRequest:
        options = demo_options(target.connection.options)
        upstream = DemoUpstream(req, target.native_model, options, self._new_id)
        return UpstreamRequest(
            method="POST",
            url=target.connection.base_url,
            headers={},
            body=b"",
            stream=req.is_stream,
            local=upstream,
        )

    def embed_batches(self, call: EmbedCall, target: Target) -> list[EmbedBatch]:
        pause = demo_options(target.connection.options).first_token_ms / 1000
        return demo_embed_batches(call, target, pause)
