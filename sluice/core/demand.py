"""What a request may cost, known before it runs: the credit hold reads this, never the
body: the prompt's ceiling and the output's (the request's own cap, else the serving
model's longest answer), times the answers asked for. (Token rate limits take the
work's prompt estimate, worked out only when a limit applies: :mod:`sluice.exchange.
work`.) Every kind of work (a chat answer streamed or whole; embeddings, whose output
ceiling is 0) states its demand in these terms, so admission is one path.
"""

from __future__ import annotations

import msgspec

from sluice.core.tokens import prompt_token_ceiling
from sluice.wire.chat import ChatRequest


class Demand(msgspec.Struct, frozen=True, kw_only=True):
    prompt_ceiling: int
    """The most tokens the prompt can be (the credit hold)."""
    output_ceiling: int | None
    """The request's own output cap per answer; None: the model's longest answer."""
    answers: int = 1
    """How many answers the output is for (chat's ``n``)."""


def chat_demand(req: ChatRequest) -> Demand:
    """A chat request's demand: its messages and tools in, ``n`` answers out."""
    return Demand(
        prompt_ceiling=prompt_token_ceiling(req),
        output_ceiling=req.output_ceiling,
        answers=req.choice_count,
    )
