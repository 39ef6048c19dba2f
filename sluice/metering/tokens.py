"""Token counts: what providers report, and the estimator used when they report nothing.

The estimator is deliberately simple and documented (docs/metering.md): one token per
four characters of text, rounded up, plus four tokens of framing per message and
three for the reply's priming. It is used for credit holds and for streams that were
cut before the provider sent usage; provider-reported counts always win.
"""

from __future__ import annotations

import msgspec

from sluice.wire.chat import ChatRequest, message_text

CHARS_PER_TOKEN = 4
MESSAGE_OVERHEAD_TOKENS = 4
REPLY_PRIMING_TOKENS = 3
_ENCODER = msgspec.json.Encoder()


class TokenUsage(msgspec.Struct):
    """Provider-neutral usage. ``prompt_tokens`` includes cache reads and writes."""

    prompt_tokens: int = 0
    completion_tokens: int = 0
    cached_tokens: int = 0
    cache_write_tokens: int = 0
    reasoning_tokens: int = 0
    provider_cost: float | None = None
    estimated: bool = False

    @property
    def total_tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens


def tokens_for_chars(chars: int) -> int:
    return -(-chars // CHARS_PER_TOKEN)


def estimate_prompt_tokens(req: ChatRequest) -> int:
    total = REPLY_PRIMING_TOKENS
    for message in req.messages:
        total += MESSAGE_OVERHEAD_TOKENS + tokens_for_chars(len(message_text(message)))
    if req.tool_list:
        total += tokens_for_chars(len(_ENCODER.encode(req.tool_list)))
    return total
