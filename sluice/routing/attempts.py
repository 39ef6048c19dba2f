"""What a call's tries leave behind, and how the caller follows them (pure).

Every try of a plan's attempts is recorded (served, skipped by the breaker, or the
error it failed with) in the order it was made; those records are what the request
log, metrics and traces report. A caller may be told as each try starts (tracing adds
a header to it) and may watch the try running now through :class:`InFlight`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from types import MappingProxyType

import msgspec
from msgspec import UNSET, UnsetType

from sluice.errors import ApiError
from sluice.routing.plan import Attempt

_NO_HEADERS: Mapping[str, str] = MappingProxyType({})

TryStarted = Callable[[int], Mapping[str, str]]
"""Told as each try that may reach its upstream starts, with the index its record will
take among the attempt records: headers to add to its upstream request (tracing's
``traceparent``). Absent, nothing is called and nothing is added."""


class AttemptRecord(msgspec.Struct):
    position: str
    model: str
    connection: str
    provider: str
    outcome: str  # "served" or the error type
    latency_ms: float
    code: str | None = None
    message: str | None = None
    hedge: bool | UnsetType = UNSET
    """True: started beside a slower attempt (``hedge_after_ms``), not after it failed
    (absent otherwise)."""


class InFlight:
    """A call watched from outside: the attempt running now; ``stopped`` (its client
    left) ends the failover after that attempt."""

    __slots__ = ("attempt", "stopped")

    def __init__(self) -> None:
        self.attempt: Attempt | None = None
        self.stopped = False


def attempt_record(
    attempt: Attempt,
    seconds: float,
    err: ApiError | None,
    outcome: str = "served",
    *,
    hedged: bool = False,
) -> AttemptRecord:
    """The record of a try of ``attempt`` that took ``seconds``: ``outcome`` when it did
    not fail, the error's type when it did."""
    conn = attempt.target.connection
    return AttemptRecord(
        position=attempt.position,
        model=attempt.target.model_id,
        connection=conn.id,
        provider=conn.provider,
        outcome=outcome if err is None else err.type,
        latency_ms=round(seconds * 1000, 3),
        code=None if err is None else err.code,
        message=None if err is None else err.message,
        hedge=True if hedged else UNSET,
    )


def try_headers(traced: TryStarted | None, records: list[AttemptRecord]) -> Mapping[str, str]:
    """The extra headers of the try starting now (its record lands at ``len(records)``)."""
    return _NO_HEADERS if traced is None else traced(len(records))
