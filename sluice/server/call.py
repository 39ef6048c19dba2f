"""One request being served, as every endpoint sees it."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING

from sluice.core.principal import Principal
from sluice.exchange.exchange import Exchange
from sluice.exchange.ports import FrontDoor, Headers
from sluice.server.message import Request, ResponseWriter

if TYPE_CHECKING:
    from sluice.server.context import GatewayContext


class Call:
    """One request being served; ``exchange`` once a front door took it."""

    __slots__ = (
        "created",
        "door",
        "exchange",
        "headers",
        "principal",
        "request",
        "request_id",
        "started",
        "writer",
    )

    def __init__(
        self,
        request: Request,
        writer: ResponseWriter,
        request_id: str,
        created: int,
        started: float,
    ) -> None:
        self.request = request
        self.writer = writer
        self.request_id = request_id
        self.created = created
        self.started = started
        self.principal: Principal | None = None
        self.headers: Headers = [("x-request-id", request_id)]
        self.exchange: Exchange | None = None
        self.door: FrontDoor | None = None
        """The front door whose wire shapes this call's errors (None: the chat wire's)."""


Endpoint = Callable[["GatewayContext", Call], Awaitable[None]]
