"""The request side of the OpenAI Chat Completions wire model (docs/api.md#the-request).

Fields the OpenAI API accepts are typed here; fields we only forward are kept as
:class:`msgspec.Raw` so they reach the upstream byte for byte. A top-level field this
model does not know fails the typed decode; the chat door then keeps it as sent in
``native`` (wire :data:`CHAT_WIRE`), for a connection that allows it
(``allow_extra_fields``), and a request no serving connection allows it on is refused.
The overrides other gateways take from the body to
steer where or how the upstream is called (``api_base``, ``api_key``, …) are refused
by name instead (:func:`refuse_overrides`): a caller who sends one learns it has no
effect. Absent fields are ``UNSET`` and stay absent when the request is encoded again.
The messages themselves are :mod:`sluice.wire.conversation`.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from msgspec import UNSET, Meta, Raw, Struct, UnsetType, field, structs

from sluice.errors import InvalidRequestError
from sluice.wire.bounds import MAX_MESSAGES, MAX_TOOLS
from sluice.wire.conversation import Message

Opt = UnsetType  # shorthand used in annotations below: "may be absent"


class _Wire(Struct):
    """Base: absent (``UNSET``) fields are not written back."""


# --- tools ---------------------------------------------------------------------------


class FunctionDefinition(_Wire):
    name: Annotated[str, Meta(min_length=1)]
    description: str | Opt = UNSET
    parameters: dict[str, Any] | Opt = UNSET
    strict: bool | Opt | None = UNSET


class Tool(_Wire):
    function: FunctionDefinition
    type: Literal["function"] = "function"
    cache_control: Raw | Opt = UNSET
    defer_loading: bool | Opt = UNSET
    """Sluice extension: loaded on demand by an upstream's tool search (others drop it)."""


class NamedFunction(_Wire):
    name: str


class NamedToolChoice(_Wire):
    function: NamedFunction
    type: Literal["function"] = "function"


ToolChoice = Literal["none", "auto", "required"] | NamedToolChoice


class JsonSchemaFormat(_Wire):
    name: str
    schema: dict[str, Any] | Opt = UNSET
    description: str | Opt = UNSET
    strict: bool | Opt | None = UNSET


class ResponseFormat(_Wire):
    type: Literal["text", "json_object", "json_schema"]
    json_schema: JsonSchemaFormat | Opt = UNSET


class CacheHints(_Wire, forbid_unknown_fields=True):
    """Sluice's: ``Cache-Control`` as a body field, for clients that cannot set headers
    (docs/cache.md#hit-miss-bypass); the shape LiteLLM takes."""

    no_cache: bool | Opt = field(default=UNSET, name="no-cache")
    no_store: bool | Opt = field(default=UNSET, name="no-store")


class StreamOptions(_Wire):
    include_usage: bool | Opt | None = UNSET
    resumable: bool | Opt | None = UNSET
    """Sluice's: the stream may be resumed after a cut (docs/api.md#resumable-streams)."""


PositiveInt = Annotated[int, Meta(ge=1, le=100_000_000)]
"""A token count a request may ask for (the bound keeps holds and encodings sane)."""
Int64 = Annotated[int, Meta(ge=-(2**63), le=2**63 - 1)]
ModelName = Annotated[str, Meta(min_length=1, max_length=512, pattern=r"^[^\x00-\x1f\x7f]+$")]
"""A model id or route slug: no control characters (it is logged and stored)."""
Probability = Annotated[float, Meta(ge=0, le=1)]
Penalty = Annotated[float, Meta(ge=-2, le=2)]
StopList = Annotated[list[str], Meta(max_length=16)]
BetaName = Annotated[str, Meta(min_length=1, max_length=128, pattern=r"^[A-Za-z0-9._-]+$")]


class NativeFields(_Wire):
    """What a front door's own wire carried that this request does not model, kept for
    an upstream that speaks that wire: sent there as given, dropped by every other
    provider. Only a door sets it (the chat door drops it from a body)."""

    wire: str
    fields: dict[str, Raw]
    owner: str | UnsetType = UNSET
    """The account the request is served for, set before the plan by a door that binds
    what it answers to it (the Responses door's sealed reasoning)."""


class ChatRequest(_Wire, forbid_unknown_fields=True):
    """``POST /v1/chat/completions`` body."""

    model: ModelName
    messages: Annotated[list[Message], Meta(min_length=1, max_length=MAX_MESSAGES)]
    stream: bool | Opt | None = UNSET
    stream_options: StreamOptions | Opt | None = UNSET
    tools: Annotated[list[Tool], Meta(max_length=MAX_TOOLS)] | Opt | None = UNSET
    tool_choice: ToolChoice | Opt | None = UNSET
    parallel_tool_calls: bool | Opt | None = UNSET
    response_format: ResponseFormat | Opt | None = UNSET
    temperature: Annotated[float, Meta(ge=0, le=2)] | Opt | None = UNSET
    top_p: Probability | Opt | None = UNSET
    frequency_penalty: Penalty | Opt | None = UNSET
    presence_penalty: Penalty | Opt | None = UNSET
    stop: str | StopList | Opt | None = UNSET
    seed: Int64 | Opt | None = UNSET
    max_tokens: PositiveInt | Opt | None = UNSET
    max_completion_tokens: PositiveInt | Opt | None = UNSET
    n: Annotated[int, Meta(ge=1, le=128)] | Opt | None = UNSET
    user: str | Opt | None = UNSET
    reasoning_effort: str | Opt | None = UNSET
    logprobs: bool | Opt | None = UNSET
    top_logprobs: Annotated[int, Meta(ge=0, le=20)] | Opt | None = UNSET
    # Forwarded untouched; the upstream validates them.
    metadata: Raw | Opt = UNSET
    logit_bias: Raw | Opt = UNSET
    service_tier: Raw | Opt = UNSET
    store: Raw | Opt = UNSET
    modalities: Raw | Opt = UNSET
    audio: Raw | Opt = UNSET
    prediction: Raw | Opt = UNSET
    verbosity: Raw | Opt = UNSET
    web_search_options: Raw | Opt = UNSET
    prompt_cache_key: Raw | Opt = UNSET
    safety_identifier: Raw | Opt = UNSET
    prompt_cache_retention: Raw | Opt = UNSET
    prompt_cache_options: Raw | Opt = UNSET
    moderation: Raw | Opt = UNSET
    functions: Raw | Opt = UNSET
    function_call: Raw | Opt = UNSET
    # Sluice extension: request-level fallback models, tried after ``model``.
    models: list[ModelName] | Opt | None = UNSET
    cache: CacheHints | Opt | None = UNSET
    """Sluice's: the response cache's ``no-cache`` / ``no-store`` (docs/cache.md)."""
    # Sluice extensions for providers that take them (others drop them): top-k sampling,
    # an exact thinking budget (over ``reasoning_effort``), beta features by name.
    top_k: PositiveInt | Opt | None = UNSET
    reasoning_budget: PositiveInt | Opt | None = UNSET
    betas: Annotated[list[BetaName], Meta(max_length=32)] | Opt | None = UNSET
    native: NativeFields | Opt = UNSET
    # Upstream overrides other gateways read from the body; refused (refuse_overrides).
    api_base: Raw | Opt = UNSET
    base_url: Raw | Opt = UNSET
    api_key: Raw | Opt = UNSET
    api_version: Raw | Opt = UNSET
    custom_llm_provider: Raw | Opt = UNSET
    aws_access_key_id: Raw | Opt = UNSET
    aws_secret_access_key: Raw | Opt = UNSET
    aws_session_token: Raw | Opt = UNSET
    aws_region_name: Raw | Opt = UNSET
    vertex_credentials: Raw | Opt = UNSET
    vertex_project: Raw | Opt = UNSET
    vertex_location: Raw | Opt = UNSET
    azure_endpoint: Raw | Opt = UNSET
    azure_ad_token: Raw | Opt = UNSET
    extra_headers: Raw | Opt = UNSET

    @property
    def is_stream(self) -> bool:
        return self.stream is True

    @property
    def include_usage(self) -> bool:
        opts = self.stream_options
        return isinstance(opts, StreamOptions) and opts.include_usage is True

    @property
    def asks_resumable(self) -> bool:
        opts = self.stream_options
        return isinstance(opts, StreamOptions) and opts.resumable is True

    @property
    def choice_count(self) -> int:
        return self.n if isinstance(self.n, int) else 1

    @property
    def output_ceiling(self) -> int | None:
        """The requested output-token cap, whichever spelling the client used."""
        for value in (self.max_completion_tokens, self.max_tokens):
            if isinstance(value, int):
                return value
        return None

    def capped(self, limit: int | None) -> ChatRequest:
        """This request with each output cap above ``limit`` (a model's
        ``max_output_tokens``) lowered to it; itself when none asks for more."""
        if limit is None:
            return self
        lowered = {
            name: limit
            for name in ("max_tokens", "max_completion_tokens")
            if isinstance(value := getattr(self, name), int) and value > limit
        }
        return structs.replace(self, **lowered) if lowered else self

    @property
    def stop_sequences(self) -> list[str]:
        stop = self.stop
        if isinstance(stop, str):
            return [stop]
        if isinstance(stop, list):
            return stop
        return []

    @property
    def tool_list(self) -> list[Tool]:
        return self.tools if isinstance(self.tools, list) else []


OVERRIDE_FIELDS = (
    "api_base",
    "base_url",
    "api_key",
    "api_version",
    "custom_llm_provider",
    "aws_access_key_id",
    "aws_secret_access_key",
    "aws_session_token",
    "aws_region_name",
    "vertex_credentials",
    "vertex_project",
    "vertex_location",
    "azure_endpoint",
    "azure_ad_token",
    "extra_headers",
)
"""Body fields that would choose the upstream or its credentials elsewhere."""


def refuse_overrides(req: ChatRequest) -> None:
    """400 naming the first upstream override the body carries (its value is not echoed)."""
    for name in OVERRIDE_FIELDS:
        if getattr(req, name) is not UNSET:
            raise InvalidRequestError(
                f"'{name}' is not accepted in a request: the gateway's configuration "
                "chooses the upstream and its credentials.",
                code="unsupported_parameter",
                param=name,
            )


EXTENSION_FIELDS = ("models", "cache", "top_k", "reasoning_budget", "betas", "native")
"""Top-level fields of ours that an OpenAI-compatible upstream does not take."""
STEERING_FIELDS = frozenset((*OVERRIDE_FIELDS, "native"))
"""Fields no connection may take from a request (``allow_extra_fields``)."""
CHAT_WIRE = "chat"
"""The chat wire's name in ``native``: the top-level fields this model does not know."""
