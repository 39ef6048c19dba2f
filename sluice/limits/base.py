"""What the gateway calls, whatever the store (memory for one process, Redis for many)."""

from __future__ import annotations

from typing import Protocol

from sluice.errors import ServiceUnavailableError
from sluice.limits.decision import Decision, Subject, Ticket


class LimiterUnavailableError(ServiceUnavailableError):
    """The shared limit store cannot be reached: the request is refused (503), never
    let through unlimited."""

    default_code = "rate_limiter_unavailable"


class Limiter(Protocol):
    async def admit(self, subject: Subject, estimated_tokens: int) -> Decision:
        """Once per request, before any upstream call: all limits pass and are charged
        (one request, ``estimated_tokens`` tokens), or nothing is charged."""
        ...

    async def finish(self, ticket: Ticket, total_tokens: int) -> None:
        """Once per admitted request, however it ended: settle its tokens."""
        ...

    async def check(self) -> None:
        """Raise :class:`LimiterUnavailableError` unless the limiter can answer now (the
        readiness probe)."""
        ...

    async def close(self) -> None: ...
