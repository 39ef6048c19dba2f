"""Sluice's consumer toolkit: a streaming chat client for any OpenAI-compatible endpoint.

::

    from sluice.client import stream_chat, ContentDelta, StreamResult

    with stream_chat(base_url="http://127.0.0.1:8787/v1", api_key=key,
                     model="sluice/demo", messages=[{"role": "user", "content": "Hi"}],
                     max_tokens=200) as stream:
        for item in stream:
            match item:
                case ContentDelta(text=text):
                    print(text, end="", flush=True)
                case StreamResult(state=state, ttft=ttft):
                    print(f"\\n{state} after {ttft:.2f} s")

Layout: ``events`` (what a stream yields), ``accumulator`` (bytes to events and a
result, pure), ``policy`` (timeouts and retries, pure), ``request`` and ``call`` (one
call's attempts, pure), ``aio`` and ``sync`` (the two IO shells), ``replay`` (fault
injection over recorded streams), ``measure`` (percentiles for ``sluice bench``).
"""

from sluice.client.aio import AsyncChatClient, AsyncChatStream, astream_chat
from sluice.client.events import (
    ChoiceResult,
    ContentDelta,
    ErrorInfo,
    ReasoningDelta,
    StreamEvent,
    StreamItem,
    StreamResult,
    StreamState,
    ToolCall,
    ToolCallFragment,
    Usage,
    UsageReport,
)
from sluice.client.policy import RetryPolicy, Timeouts, is_retryable
from sluice.client.sync import ChatClient, ChatStream, stream_chat

__all__ = (
    "AsyncChatClient",
    "AsyncChatStream",
    "ChatClient",
    "ChatStream",
    "ChoiceResult",
    "ContentDelta",
    "ErrorInfo",
    "ReasoningDelta",
    "RetryPolicy",
    "StreamEvent",
    "StreamItem",
    "StreamResult",
    "StreamState",
    "Timeouts",
    "ToolCall",
    "ToolCallFragment",
    "Usage",
    "UsageReport",
    "astream_chat",
    "is_retryable",
    "stream_chat",
)
