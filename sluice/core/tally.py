"""What a request used, as a front door reports it."""

from __future__ import annotations

from collections.abc import Callable

import msgspec

from sluice.wire.chunks import Usage


class Tally(msgspec.Struct, frozen=True):
    """What a request used, as a door reports it: the priced usage, how many of its
    prompt tokens were cache writes, and the credits charged (metered accounts, at the
    end of an answer)."""

    usage: Usage
    cache_write_tokens: int = 0
    credits_used: float | None = None


Opening = Callable[[], Tally | None]
"""The usage known when a stream's first upstream event arrived: the upstream's own early
counts, else the prompt estimated (the ending's tally corrects it). Worked out only for a
door that reports it (an estimate costs a pass over the prompt)."""
