"""The gateway: everything a request needs, built once, and the request dispatcher.

Dispatch is on the raw request path, exactly; there is no path normalization and no
use of ``Host``. Every response, errors included, carries ``X-Request-Id``.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from random import Random

import msgspec

from sluice import __version__
from sluice.errors import ApiError, InternalError, MethodNotAllowedError, NotFoundError
from sluice.ids import IdFactory, random_id
from sluice.providers.registry import AdapterRegistry
from sluice.routing.breaker import Breaker
from sluice.routing.catalog import Catalog
from sluice.routing.plan import Planner
from sluice.routing.router import AttemptRecord, Router
from sluice.server.auth import Authenticator
from sluice.server.chat import chat_completions
from sluice.server.exchange import ClientGoneError, Headers, Request, ResponseWriter
from sluice.server.http1 import Limits
from sluice.server.metrics import Metrics
from sluice.server.models import model_list
from sluice.server.responses import JSON, PROMETHEUS, connection_error, error_headers
from sluice.settings import Settings
from sluice.storage.base import Principal, Store
from sluice.transport.http import HttpTransport
from sluice.wire.errors import error_event, error_json

_log = logging.getLogger("sluice.access")
_errors = logging.getLogger("sluice.server")


class Call:
    """One request being served."""

    __slots__ = (
        "attempts",
        "created",
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
        self.attempts: list[AttemptRecord] = []


Endpoint = Callable[["Gateway", Call], Awaitable[None]]


async def _health(gw: Gateway, call: Call) -> None:
    await call.writer.send(200, [*call.headers, JSON], b'{"status":"ok"}')


async def _models(gw: Gateway, call: Call) -> None:
    await call.writer.send(200, [*call.headers, JSON], gw.models_body)


async def _metrics(gw: Gateway, call: Call) -> None:
    await call.writer.send(200, [*call.headers, PROMETHEUS], gw.metrics.render())


class Gateway:
    def __init__(
        self,
        settings: Settings,
        store: Store,
        *,
        new_id: IdFactory = random_id,
        wall_clock: Callable[[], float] = time.time,
        clock: Callable[[], float] = time.monotonic,
        rng: Random | None = None,
    ) -> None:
        rng = rng or Random()
        self.settings = settings
        self.store = store
        self.new_id = new_id
        self.wall_clock = wall_clock
        self.clock = clock
        self.catalog = Catalog.with_overrides(list(settings.models))
        self.planner = Planner(self.catalog, settings.connections, settings.routes)
        self.transport = HttpTransport(f"sluice/{__version__}", clock)
        routing = settings.routing
        self.router = Router(
            registry=AdapterRegistry(new_id),
            transport=self.transport,
            breaker=Breaker(
                routing.breaker_failures, routing.breaker_cooldown, routing.max_retry_after
            ),
            clock=clock,
            rng=rng,
            error_body_bytes=settings.server.upstream_error_body_bytes,
        )
        self.auth = Authenticator(store, dev_key_enabled=settings.server.dev_key, clock=clock)
        # path -> method -> (endpoint, needs a key); matched on the raw path only
        self._routes: dict[str, dict[str, tuple[Endpoint, bool]]] = {
            "/health": {"GET": (_health, False)},
            "/v1/models": {"GET": (_models, True)},
            "/v1/chat/completions": {"POST": (chat_completions, True)},
            "/metrics": {"GET": (_metrics, True)},
        }
        self.metrics = Metrics(self.router.breaker, clock)
        self.models_body = msgspec.json.encode(
            model_list(self.catalog, self.planner, settings.routes)
        )
        server = settings.server
        self.limits = Limits(
            max_body_bytes=server.max_body_bytes,
            max_header_bytes=server.max_header_bytes,
            header_timeout=server.header_timeout,
            body_timeout=server.body_timeout,
            keepalive_timeout=server.keepalive_timeout,
        )

    async def start(self) -> None:
        await self.transport.start()

    async def close(self) -> None:
        await self.transport.close()

    def refused(self, status: int, message: str) -> tuple[Headers, bytes]:
        """The response for a request the HTTP layer refused (too big, too slow, malformed)."""
        err = connection_error(status, message)
        return error_headers(err, [("x-request-id", self.new_id("req"))]), error_json(err)

    async def handle(self, request: Request, writer: ResponseWriter) -> None:
        call = Call(request, writer, self.new_id("req"), int(self.wall_clock()), self.clock())
        status = 200
        try:
            methods = self._routes.get(request.path)
            if methods is None:
                raise NotFoundError(f"Unknown request URL: {request.method} {request.path}.")
            found = methods.get(request.method)
            if found is None:
                raise MethodNotAllowedError(
                    f"Method {request.method} is not allowed here; use {', '.join(methods)}."
                )
            endpoint, needs_key = found
            if needs_key:
                call.principal = await self.auth.authenticate(request.headers.get("authorization"))
            await endpoint(self, call)
        except ApiError as err:
            status = err.http_status
            await self._fail(call, err)
        except (ClientGoneError, asyncio.CancelledError):
            status = 499
            raise
        except Exception:
            status = 500
            _errors.exception("request %s failed", call.request_id)
            await self._fail(call, InternalError("The gateway failed to handle the request."))
        finally:
            path = request.path if request.path in self._routes else "other"
            self.metrics.request(path, status, call.attempts)
            if _log.isEnabledFor(logging.INFO):
                _log.info(
                    "%s %s %s %d%s",
                    call.request_id,
                    request.method,
                    request.path,
                    status,
                    "".join(f" {a.position}:{a.connection}:{a.outcome}" for a in call.attempts),
                )

    async def _fail(self, call: Call, err: ApiError) -> None:
        writer = call.writer
        if not writer.started:
            await writer.send(err.http_status, error_headers(err, call.headers), error_json(err))
        elif not writer.finished:
            await writer.end(error_event(err), close=True)
