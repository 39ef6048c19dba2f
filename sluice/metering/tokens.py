"""Token counts: what providers report, and the estimator used when they report nothing.

The estimator is deliberately simple and documented (docs/metering.md): one token per
four characters of text, rounded up, plus four tokens of framing per message and
three for the reply's priming. It is used for streams that were cut before the
provider sent usage; provider-reported counts always win. Credit holds use
:func:`prompt_token_ceiling`, an upper bound rather than a guess.
"""

from __future__ import annotations

import msgspec

from sluice.wire.chat import ChatRequest, TextPart, message_text

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


MEDIA_TOKEN_CEILING = 6000
"""Tokens held for each image, audio or file part (what one can cost at most, roughly)."""


def prompt_token_ceiling(req: ChatRequest) -> int:
    """An upper bound for credit holds: one token per UTF-8 byte of text (no tokenizer
    makes a token of less than a byte) plus a ceiling per media part."""
    total = REPLY_PRIMING_TOKENS
    for message in req.messages:
        total += MESSAGE_OVERHEAD_TOKENS + len(message_text(message).encode("utf-8"))
        content = message.content
        if isinstance(content, list):
            total += MEDIA_TOKEN_CEILING * sum(not isinstance(part, TextPart) for part in content)
    if req.tool_list:
        total += len(_ENCODER.encode(req.tool_list))
    return total


def estimate_prompt_tokens(req: ChatRequest) -> int:
    total = REPLY_PRIMING_TOKENS
    for message in req.messages:
        total += MESSAGE_OVERHEAD_TOKENS + tokens_for_chars(len(message_text(message)))
    if req.tool_list:
        total += tokens_for_chars(len(_ENCODER.encode(req.tool_list)))
    return total
