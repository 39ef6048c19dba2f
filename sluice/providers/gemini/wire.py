"""Gemini's ``generateContent`` format (v1beta) as typed structs, for both directions.

Names are camelCase on the wire (``rename="camel"``) and absent fields stay absent
when encoding (``omit_defaults``). Only what Sluice reads or writes is modelled: the
rest of a response (``safetyRatings``, ``citationMetadata``, ``modelVersion`` …) is
skipped when decoding. ``thoughtSignature`` is base64 on the wire; we only write it.
"""

from __future__ import annotations

from typing import Any

import msgspec
from msgspec import Struct


class _Wire(Struct, rename="camel", omit_defaults=True):
    """Base: camelCase names, defaults not written."""


# --- content (requests and responses) ----------------------------------------------


class Blob(_Wire):
    mime_type: str
    data: str


class FileData(_Wire):
    file_uri: str
    mime_type: str | None = None


class FunctionCall(_Wire):
    name: str = ""
    args: dict[str, Any] | None = None
    id: str | None = None


class FunctionResponse(_Wire):
    name: str
    response: dict[str, Any]


class Part(_Wire):
    text: str | None = None
    thought: bool | None = None
    inline_data: Blob | None = None
    file_data: FileData | None = None
    function_call: FunctionCall | None = None
    function_response: FunctionResponse | None = None
    thought_signature: str | None = None


class Content(_Wire):
    parts: list[Part] = []
    role: str | None = None


# --- the request -----------------------------------------------------------------


class FunctionDeclaration(_Wire):
    name: str
    description: str | None = None
    parameters_json_schema: dict[str, Any] | None = None


class FunctionTools(_Wire):
    function_declarations: list[FunctionDeclaration]


class FunctionCallingConfig(_Wire):
    mode: str
    allowed_function_names: list[str] | None = None


class ToolConfig(_Wire):
    function_calling_config: FunctionCallingConfig


class ThinkingConfig(_Wire):
    thinking_budget: int | None = None
    include_thoughts: bool | None = None


class GenerationConfig(_Wire):
    stop_sequences: list[str] | None = None
    max_output_tokens: int | None = None
    temperature: float | None = None
    top_p: float | None = None
    seed: int | None = None
    candidate_count: int | None = None
    presence_penalty: float | None = None
    frequency_penalty: float | None = None
    response_mime_type: str | None = None
    response_json_schema: dict[str, Any] | None = None
    thinking_config: ThinkingConfig | None = None


class GenerateContentRequest(_Wire):
    contents: list[Content]
    system_instruction: Content | None = None
    tools: list[FunctionTools] | None = None
    tool_config: ToolConfig | None = None
    generation_config: GenerationConfig | None = None


# --- responses (decode only) -------------------------------------------------------


class Candidate(_Wire):
    content: Content | None = None
    finish_reason: str | None = None
    index: int = 0


class PromptFeedback(_Wire):
    block_reason: str | None = None


class UsageMetadata(_Wire):
    prompt_token_count: int = 0
    candidates_token_count: int = 0
    thoughts_token_count: int = 0
    cached_content_token_count: int = 0
    tool_use_prompt_token_count: int = 0


class ErrorDetail(_Wire):
    """One entry of ``error.details``: ErrorInfo has ``reason``, RetryInfo ``retryDelay``."""

    reason: str | None = None
    retry_delay: str | None = None


class ErrorBody(_Wire):
    code: int | None = None
    message: str | None = None
    status: str | None = None
    details: list[ErrorDetail] = []


class GenerateContentResponse(_Wire):
    candidates: list[Candidate] = []
    prompt_feedback: PromptFeedback | None = None
    usage_metadata: UsageMetadata | None = None
    error: ErrorBody | None = None


class ErrorEnvelope(_Wire):
    error: ErrorBody | None = None


RESPONSE = msgspec.json.Decoder(GenerateContentResponse)
ERROR = msgspec.json.Decoder(ErrorEnvelope | list[ErrorEnvelope])
ENCODER = msgspec.json.Encoder()
