"""The port through which processes share resumable streams (docs/api.md#several-replicas):
the process running a stream (its owner) mirrors it when another asks, the others find
it, read its tail and ask the owner to stop it. :class:`~.redis_mirror.RedisMirror` is
the one backend, chosen in the composition root when ``[limits] redis_url`` is set.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncGenerator, Sequence
from typing import Protocol


class MirrorSource(Protocol):
    """What is mirrored of a stream its owner runs (the exchange's relay)."""

    @property
    def request_id(self) -> str: ...
    @property
    def account_id(self) -> str: ...
    @property
    def headers(self) -> Sequence[tuple[str, str]]: ...
    @property
    def keepalive(self) -> bytes: ...
    @property
    def opening(self) -> bytes: ...
    @property
    def overflowed(self) -> bool: ...
    @property
    def ended(self) -> str | None: ...

    def signal(self) -> asyncio.Event:
        """Set at the next event or the end (taken before reading the events)."""
        ...

    def after(self, last: int) -> list[bytes]:
        """The events after the ``last`` first, each ending with its blank line."""
        ...


class Owner(Protocol):
    """What the owner of streams does for asks from other processes."""

    def stop_asked(self, request_id: str, account_id: str) -> None: ...

    def wanted(self, request_id: str, account_id: str) -> None: ...


class Mirrored:
    """A stream another process runs, as its mirror describes it."""

    __slots__ = ("count", "ended", "headers", "keepalive", "opening", "request_id")

    def __init__(
        self,
        request_id: str,
        *,
        headers: Sequence[tuple[str, str]],
        keepalive: bytes,
        opening: bytes,
        count: int,
        ended: str | None,
    ) -> None:
        self.request_id = request_id
        self.headers = list(headers)
        self.keepalive = keepalive
        self.opening = opening
        """A background response's object as created (empty for another stream)."""
        self.count = count
        """Its events mirrored so far (an ``id:`` past it names no event)."""
        self.ended = ended
        """How it ended, once its mirror says so."""


class StreamMirror(Protocol):
    """Streams shared between processes. Errors of the backend are a 503
    ``relay_unavailable`` (:class:`~sluice.errors.ServiceUnavailableError`)."""

    def start(self, owner: Owner) -> None:
        """Hear what other processes ask of ``owner``'s streams."""
        ...

    async def close(self) -> None: ...

    def mirror(self, relay: MirrorSource, retention: float) -> asyncio.Task[bool]:
        """Mirror ``relay`` until it ends, off the response path; the task's result says
        whether the mirror holds its end."""
        ...

    async def find(self, request_id: str, account_id: str) -> Mirrored | None:
        """The account's stream another process runs or ran, as mirrored (asking its
        owner to mirror it first); None when there is none, or it is another's."""
        ...

    def tail(self, request_id: str, after: int) -> AsyncGenerator[list[bytes] | str, None]:
        """The events after event ``after``, in batches, then how it ended: its ending,
        or ``lost`` when its owner died first."""
        ...

    async def first(self, request_id: str) -> bytes | None:
        """Its first event, if it was mirrored."""
        ...

    async def stop(self, request_id: str, account_id: str) -> tuple[str, int]:
        """Ask its owner to stop it; how it ended and its events, once mirrored."""
        ...
