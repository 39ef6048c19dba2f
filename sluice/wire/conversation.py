"""The conversation in a chat request: each role's message, their content parts, the
tool calls an assistant turn made and the signed reasoning it carried
(docs/api.md#the-request). Fields we only forward are :class:`msgspec.Raw`; absent
fields are ``UNSET`` and stay absent when a message is encoded again.
"""

from __future__ import annotations

from typing import Annotated, Literal, TypeVar

from msgspec import UNSET, Meta, Raw, Struct, UnsetType

from sluice.wire.bounds import MAX_BLOCKS

Opt = UnsetType  # shorthand used in annotations below: "may be absent"
_T = TypeVar("_T")
Blocks = Annotated[list[_T], Meta(max_length=MAX_BLOCKS)]
"""The content parts of one message."""


class _Wire(Struct):
    """Base: absent (``UNSET``) fields are not written back."""


# --- content parts -----------------------------------------------------------------


class TextPart(_Wire, tag_field="type", tag="text"):
    text: str
    cache_control: Raw | Opt = UNSET


class ImageURL(_Wire):
    url: str
    detail: str | Opt = UNSET


class ImagePart(_Wire, tag_field="type", tag="image_url"):
    image_url: ImageURL
    cache_control: Raw | Opt = UNSET


class AudioPart(_Wire, tag_field="type", tag="input_audio"):
    input_audio: Raw


class FilePart(_Wire, tag_field="type", tag="file"):
    file: Raw


class RefusalPart(_Wire, tag_field="type", tag="refusal"):
    refusal: str


class DocumentPart(_Wire, tag_field="type", tag="document"):
    """Sluice extension: a document (PDF, plain text, content blocks) as the Messages
    wire sends it; ``source`` and ``citations`` are forwarded as given."""

    source: Raw
    title: str | Opt | None = UNSET
    context: str | Opt | None = UNSET
    citations: Raw | Opt = UNSET
    cache_control: Raw | Opt = UNSET


UserContentPart = TextPart | ImagePart | AudioPart | FilePart | DocumentPart
AssistantContentPart = TextPart | RefusalPart


# --- thinking, kept with what the provider signed --------------------------------------


class ThinkingBlock(_Wire, tag_field="type", tag="thinking"):
    """Sluice extension: a provider's reasoning with the signature it issued, so a later
    turn can send it back."""

    thinking: str
    signature: str


class RedactedThinkingBlock(_Wire, tag_field="type", tag="redacted_thinking"):
    """Sluice extension: reasoning the provider returned encrypted (``data``)."""

    data: str


ThinkingBlocks = list[ThinkingBlock | RedactedThinkingBlock]


# --- tool calls in messages ----------------------------------------------------------


class FunctionCall(_Wire):
    name: str
    arguments: str


class ToolCall(_Wire):
    id: str
    function: FunctionCall
    type: Literal["function"] = "function"
    cache_control: Raw | Opt = UNSET


# --- messages, tagged by role --------------------------------------------------------


class SystemMessage(_Wire, tag_field="role", tag="system"):
    content: str | Blocks[TextPart]
    name: str | Opt = UNSET
    output_config: Raw | Opt = UNSET
    """Sluice extension: this turn's output settings, for an upstream that takes them
    (a Messages-wire system turn's); other providers drop it."""


class DeveloperMessage(_Wire, tag_field="role", tag="developer"):
    content: str | Blocks[TextPart]
    name: str | Opt = UNSET


class UserMessage(_Wire, tag_field="role", tag="user"):
    content: str | Blocks[UserContentPart]
    name: str | Opt = UNSET


class AssistantMessage(_Wire, tag_field="role", tag="assistant"):
    content: str | Blocks[AssistantContentPart] | Opt | None = UNSET
    tool_calls: list[ToolCall] | Opt = UNSET
    name: str | Opt = UNSET
    refusal: str | Opt | None = UNSET
    reasoning_content: str | Opt | None = UNSET
    thinking_blocks: ThinkingBlocks | Opt = UNSET
    """Sluice extension: the reasoning of this turn as signed blocks (before its text)."""


class ToolMessage(_Wire, tag_field="role", tag="tool"):
    content: str | Blocks[TextPart | ImagePart]
    tool_call_id: str
    is_error: bool | Opt = UNSET
    """Sluice extension: the tool failed and ``content`` says how."""
    cache_control: Raw | Opt = UNSET


class FunctionMessage(_Wire, tag_field="role", tag="function"):
    name: str
    content: str | None = None


Message = (
    SystemMessage
    | DeveloperMessage
    | UserMessage
    | AssistantMessage
    | ToolMessage
    | FunctionMessage
)


def message_text(message: Message) -> str:
    """The plain text of a message (text parts joined), for estimators and demos."""
    content = message.content
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(p.text for p in content if isinstance(p, TextPart))
    return ""
