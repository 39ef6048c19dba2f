"""The gateway: everything a request needs, built once, and the request dispatcher.

Dispatch is on the raw request path, exactly; there is no path normalization and no
use of ``Host``. Every response, errors included, carries ``X-Request-Id``.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable, Coroutine, Mapping
from random import Random
from typing import Any

import msgspec

from sluice import __version__
from sluice.accounts.vault import Vault
from sluice.errors import (
    ApiError,
    InternalError,
    MethodNotAllowedError,
    NotFoundError,
    ShuttingDownError,
)
from sluice.guardrails.selection import Guardrails
from sluice.ids import IdFactory, random_id
from sluice.limits.base import Limiter, LimiterUnavailableError
from sluice.limits.decision import Subject
from sluice.limits.decision import Ticket as LimitTicket
from sluice.limits.stores.memory import MemoryLimiter
from sluice.limits.stores.redis import RedisLimiter
from sluice.metering.charges import Rate, resolve_rate
from sluice.metering.meter import Meter
from sluice.metering.pricing import Price
from sluice.providers.registry import AdapterRegistry
from sluice.routing.breaker import Breaker
from sluice.routing.catalog import Catalog
from sluice.routing.plan import Attempt
from sluice.routing.router import AttemptRecord, Router
from sluice.server import endpoints
from sluice.server.admin import ADMIN_PREFIX, admin
from sluice.server.auth import Authenticator
from sluice.server.chat import chat_completions
from sluice.server.endpoints import REQUEST_LOG_PREFIX
from sluice.server.exchange import ClientGoneError, Headers, Request, ResponseWriter
from sluice.server.intake import Limits
from sluice.server.metrics import Metrics
from sluice.server.models import model_list
from sluice.server.outcome import Outcome
from sluice.server.responses import connection_error, error_headers
from sluice.server.tenants import Tenants
from sluice.settings import Settings
from sluice.storage.base import Principal, Store
from sluice.storage.writer import WriteBehind
from sluice.transport.guarded_resolver import check_base_url, system_resolve
from sluice.transport.http import HttpTransport
from sluice.wire.errors import error_event, error_json

_log = logging.getLogger("sluice.access")
_errors = logging.getLogger("sluice.server")


class Call:
    """One request being served."""

    __slots__ = (
        "attempts",
        "created",
        "disconnect",
        "headers",
        "limit_ticket",
        "outcome",
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
        self.outcome: Outcome | None = None
        self.limit_ticket: LimitTicket | None = None
        self.disconnect: str | None = None
        """``"drain"`` once the upstream is read on after the client left; else unset."""


Endpoint = Callable[["Gateway", Call], Awaitable[None]]


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
        vault = Vault(settings.secret_key) if settings.secret_key is not None else None
        self.vault = vault
        self.tenants = Tenants(
            store=store,
            vault=vault,
            catalog=self.catalog,
            connections=settings.connections,
            routes=settings.routes,
            clock=clock,
        )
        self.planner = self.tenants.shared.planner
        self.transport = HttpTransport(
            f"sluice/{__version__}",
            clock,
            allow_private_upstreams=settings.server.allow_private_upstreams,
            receive_buffer_bytes=settings.server.upstream_socket_buffer_bytes,
        )
        routing = settings.routing
        self.router = Router(
            registry=AdapterRegistry(new_id, settings.server.upstream_event_bytes),
            transport=self.transport,
            breaker=Breaker(
                routing.breaker_failures, routing.breaker_cooldown, routing.max_retry_after
            ),
            clock=clock,
            rng=rng,
            error_body_bytes=settings.server.upstream_error_body_bytes,
            body_bytes=settings.server.upstream_body_bytes,
        )
        self.auth = Authenticator(store, dev_key_enabled=settings.server.dev_key, clock=clock)
        self.guardrails = Guardrails(settings.guardrails)
        # path -> method -> (endpoint, needs a key); matched on the raw path only
        self._routes: dict[str, dict[str, tuple[Endpoint, bool]]] = {
            "/health": {"GET": (endpoints.health, False)},
            "/v1/models": {"GET": (endpoints.models, True)},
            "/v1/chat/completions": {"POST": (chat_completions, True)},
            "/metrics": {"GET": (endpoints.metrics, True)},
        }
        self._request_log: dict[str, tuple[Endpoint, bool]] = {"GET": (endpoints.request_log, True)}
        self._admin: dict[str, tuple[Endpoint, bool]] = {
            method: (admin, False) for method in ("GET", "POST", "PUT", "DELETE")
        }
        limits = settings.limits
        self.limiter: Limiter = (
            RedisLimiter.from_url(limits.redis_url, prefix=limits.key_prefix)
            if limits.redis_url
            else MemoryLimiter(clock)
        )
        self._background: set[asyncio.Task[None]] = set()
        self._drains: set[asyncio.Task[None]] = set()
        self._may_drain = True
        self.writer = WriteBehind(
            store, wall_clock, reclaim_every=settings.metering.reclaim_interval
        )
        self.meter = Meter(
            store,
            self.writer,
            new_id=new_id,
            wall_clock=wall_clock,
            hold_ttl=settings.metering.hold_ttl,
        )
        self.metrics = Metrics(
            self.router.breaker, clock, frozenset(c.id for c in settings.connections)
        )
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
            write_timeout=server.client_write_timeout,
            max_concurrent_bodies=server.max_concurrent_bodies,
            max_buffered_body_bytes=server.max_buffered_body_bytes,
            write_buffer_bytes=server.client_write_buffer_bytes,
            socket_buffer_bytes=server.client_socket_buffer_bytes,
        )

    async def start(self) -> None:
        await self.transport.start()
        self.writer.start()

    def stop_draining(self) -> None:
        """Shutting down: a client leaving from now on cancels its upstream call."""
        self._may_drain = False

    async def close(self) -> None:
        self._may_drain = False
        while self._drains:  # settled with what they read so far
            for task in self._drains:
                task.cancel()
            await asyncio.wait(self._drains)
        await self.transport.close()
        await self.guardrails.close()
        if self._background:
            await asyncio.wait(self._background, timeout=5)
        await self.limiter.close()
        await self.writer.close()

    def limit_subject(self, principal: Principal) -> Subject | None:
        """The limits that apply to a caller; None when none do (no limiter call)."""
        limits = self.settings.limits
        key = limits.keys.get(principal.key_prefix, limits.key)
        account = limits.accounts.get(principal.account_name, limits.account)
        if key is None and account is None:
            return None
        return Subject(principal.key_id, principal.account_id, key=key, account=account)

    @staticmethod
    def rate(attempt: Attempt, account_prices: Mapping[str, Price]) -> Rate:
        """The price that applies to one attempt (docs/metering.md)."""
        return resolve_rate(attempt.model, attempt.target.connection, account_prices)

    def _endpoints(self, path: str) -> dict[str, tuple[Endpoint, bool]] | None:
        methods = self._routes.get(path)
        if methods is None and path.startswith(REQUEST_LOG_PREFIX):
            return self._request_log
        if methods is None and path.startswith(ADMIN_PREFIX):
            return self._admin
        return methods

    async def check_upstream_url(self, url: str) -> None:
        """Where an account's own connection may point (docs/security.md): checked when
        saved, and again on every connect by the transport's guarded pool."""
        await check_base_url(
            url,
            allow_private=self.settings.server.allow_private_upstreams,
            resolve=system_resolve,
        )

    def refused(self, status: int, message: str) -> tuple[Headers, bytes]:
        """The response for a request the HTTP layer refused (too big, too slow, malformed)."""
        err = connection_error(status, message)
        return error_headers(err, [("x-request-id", self.new_id("req"))]), error_json(err)

    async def handle(self, request: Request, writer: ResponseWriter) -> None:
        call = Call(request, writer, self.new_id("req"), int(self.wall_clock()), self.clock())
        status = 200
        method = request.method  # as sent, for the log
        try:
            methods = self._endpoints(request.path)
            if methods is None:
                raise NotFoundError(f"Unknown request URL: {method} {request.path}.")
            if method == "HEAD" and "GET" in methods:
                request.method = "GET"  # endpoints serve GET; the writer drops the body
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
            if call.outcome is not None and call.outcome.error is None:
                call.outcome.error = err
            await self._fail(call, err)
        except (ClientGoneError, asyncio.CancelledError):
            status = 499
            if call.writer.interrupted:  # the gateway is stopping, not the client leaving
                status = self._interrupted(call)
            raise
        except Exception:
            status = 500
            _errors.exception("request %s failed", call.request_id)
            await self._fail(call, InternalError("The gateway failed to handle the request."))
        finally:
            if call.disconnect != "drain":  # a drain settles its call when it ends
                self._settle(call, status)
            path = request.path if request.path in self._routes else "other"
            self.metrics.request(path, status, call.attempts)
            if _log.isEnabledFor(logging.INFO):
                _log.info(
                    "%s %s %s %d%s",
                    call.request_id,
                    method,
                    request.path,
                    status,
                    "".join(f" {a.position}:{a.connection}:{a.outcome}" for a in call.attempts),
                )

    def drain(self, call: Call, draining: Callable[[], Coroutine[Any, Any, None]]) -> bool:
        """Read on after the client left (``on_disconnect = "drain"``): the call is
        settled and logged when ``draining()`` ends. False, nothing started, once the
        gateway is stopping: the caller cancels instead."""
        if not self._may_drain:
            return False
        call.disconnect = "drain"
        task = asyncio.get_running_loop().create_task(self._drained(call, draining()))
        self._drains.add(task)
        task.add_done_callback(self._drains.discard)
        return True

    async def _drained(self, call: Call, draining: Coroutine[Any, Any, None]) -> None:
        # settled well before its credit hold expires (an expired hold is reclaimed free)
        budget = 0.9 * self.settings.metering.hold_ttl - (self.clock() - call.started)
        try:
            async with asyncio.timeout(budget):
                await draining
        except TimeoutError:
            _errors.warning("drain of request %s cut at its hold's lifetime", call.request_id)
        except Exception:
            _errors.exception("draining request %s failed", call.request_id)
        finally:
            self._settle(call, 499)

    def _settle(self, call: Call, status: int) -> None:
        """Settle the hold and queue the request-log row (no I/O here)."""
        outcome, principal = call.outcome, call.principal
        if outcome is None or principal is None:
            return
        tokens = outcome.tokens()
        charged = outcome.charge(tokens)
        if call.limit_ticket is not None:
            total = 0 if tokens is None else tokens.total_tokens
            task = asyncio.get_running_loop().create_task(
                self._finish_limits(call.limit_ticket, total)
            )
            self._background.add(task)
            task.add_done_callback(self._background.discard)
        if outcome.ticket is not None:
            self.meter.settle(outcome.ticket, charged)
        self.writer.log(
            outcome.record(
                request_id=call.request_id,
                account_id=principal.account_id,
                key_id=principal.key_id,
                created=call.created,
                duration=self.clock() - call.started,
                http_status=status,
                disconnect=call.disconnect or ("cancel" if status == 499 else None),
                attempts=call.attempts,
                tokens=tokens,
                charged=charged,
            )
        )

    async def _finish_limits(self, ticket: LimitTicket, total_tokens: int) -> None:
        try:
            await self.limiter.finish(ticket, total_tokens)
        except LimiterUnavailableError:
            _errors.warning("could not settle rate-limit tokens: limiter unavailable")

    def _interrupted(self, call: Call) -> int:
        """A request cut by shutdown: its last event (or a 503) goes out now, without
        waiting for the client; its outcome says ``shutdown``. Returns the status."""
        err = ShuttingDownError()
        writer, outcome = call.writer, call.outcome
        if outcome is not None:
            outcome.error = err
        try:
            if not writer.started:
                writer.keep_alive = False
                writer.send_now(err.http_status, error_headers(err, call.headers), error_json(err))
                return err.http_status
            if not writer.finished:
                usage = None
                if outcome is not None and outcome.req.include_usage:
                    usage = outcome.wire_usage(cut=True)
                writer.end_now(error_event(err, usage))
        except ClientGoneError:
            pass
        return 200

    async def _fail(self, call: Call, err: ApiError) -> None:
        writer = call.writer
        if not writer.started:
            await writer.send(err.http_status, error_headers(err, call.headers), error_json(err))
        elif not writer.finished:
            await writer.end(error_event(err), close=True)
