"""Token counts: what providers report, and the estimator used when they report nothing.

The estimator is deliberately simple and documented (docs/metering.md): one token per
four characters of text, rounded up, plus four tokens of framing per message and
three for the reply's priming. It is used for streams that were cut before the
provider sent usage; provider-reported counts always win. Credit holds use
:func:`prompt_token_ceiling`, an upper bound rather than a guess.

Reported counts are untrusted input (docs/metering.md): every :class:`TokenUsage`, however
it was built, holds counts in ``0 .. MAX_REPORTED_TOKENS`` and a cost that is finite,
not negative and at most ``MAX_REPORTED_COST_USD`` (a cost that is not a number, or is
negative, is dropped: the request is priced from our table instead).
"""

from __future__ import annotations

import msgspec

from sluice.wire.chat import ChatRequest
from sluice.wire.conversation import TextPart, message_text

CHARS_PER_TOKEN = 4
MESSAGE_OVERHEAD_TOKENS = 4
REPLY_PRIMING_TOKENS = 3
_ENCODER = msgspec.json.Encoder()


def tokens_for_chars(chars: int) -> int:
    return -(-chars // CHARS_PER_TOKEN)


MEDIA_TOKEN_CEILING = 6000
"""Tokens held for each image, audio or file part (what one can cost at most, roughly)."""


def prompt_token_ceiling(req: ChatRequest) -> int:
    """An upper bound for credit holds: one token per UTF-8 byte of text (no tokenizer
    makes a token of less than a byte) plus a ceiling per media part."""
    total = REPLY_PRIMING_TOKENS
    for message in req.messages:
        total += MESSAGE_OVERHEAD_TOKENS + utf8_length(message_text(message))
        content = message.content
        if isinstance(content, list):
            total += MEDIA_TOKEN_CEILING * sum(not isinstance(part, TextPart) for part in content)
    if req.tool_list:
        total += len(_ENCODER.encode(req.tool_list))
    return total


def utf8_length(text: str) -> int:
    """Bytes of ``text`` in UTF-8, without encoding it when it is ASCII (most prompts)."""
    return len(text) if text.isascii() else len(text.encode("utf-8"))


def estimate_prompt_tokens(req: ChatRequest) -> int:
    total = REPLY_PRIMING_TOKENS
    for message in req.messages:
        total += MESSAGE_OVERHEAD_TOKENS + tokens_for_chars(len(message_text(message)))
    if req.tool_list:
        total += tokens_for_chars(len(_ENCODER.encode(req.tool_list)))
    return total
