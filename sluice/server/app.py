"""The gateway: the request dispatcher over the parts :func:`~.compose.create_app` built.

Dispatch is on the raw request path, exactly (a path under ``/v1`` also answers
without it, and is then handled, logged and counted as its ``/v1`` path); there is no
other path normalization and no use of ``Host``. Every response, errors included,
carries ``X-Request-Id``. A front door's endpoint decodes the body and hands the
request to a new :class:`~sluice.exchange.exchange.Exchange`, which owns the rest of
its life.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Protocol, TypeVar

import msgspec

from sluice.accounts.sealing import AccountSeal
from sluice.accounts.vault import Vault
from sluice.errors import (
    ApiError,
    ConfigError,
    MethodNotAllowedError,
    NotFoundError,
    ShuttingDownError,
)
from sluice.exchange.admission import count_call
from sluice.exchange.failures import answer_failure, answer_shutdown, unexpected_failure
from sluice.exchange.heads import error_headers
from sluice.exchange.ports import ClientGoneError, Headers
from sluice.exchange.refusals import REFUSAL_STATUSES, held
from sluice.exchange.relay import Relays
from sluice.exchange.services import Services
from sluice.exchange.tenants import Tenants
from sluice.frontdoors.responses.memory import ResponseMemory
from sluice.ids import IdFactory
from sluice.routing.catalog import Catalog
from sluice.server import request_list, spend_report
from sluice.server.auth import Authenticator, credentials
from sluice.server.call import Call, Endpoint
from sluice.server.cors import allowed_origin, cors_headers, is_preflight, preflight_headers
from sluice.server.count_tokens import (
    COUNT_TOKENS_PATH,
    INPUT_TOKENS_PATH,
    CountCache,
)
from sluice.server.doors import log_unread_refusal
from sluice.server.endpoints import REQUEST_LOG_PREFIX
from sluice.server.generation import Generation, Reloaded
from sluice.server.intake import Intake, Limits
from sluice.server.live import LiveFeeds
from sluice.server.logformat import AccessLine, RefusalLine, printable
from sluice.server.message import Request, ResponseWriter
from sluice.server.models import MODELS_PREFIX
from sluice.server.openapi import openapi_document
from sluice.server.pacing import Pacer
from sluice.server.reload import Reloader
from sluice.server.responses import connection_error
from sluice.server.routes import Routes
from sluice.server.stored_responses import RESPONSES_PREFIX, streams_again
from sluice.settings import Settings
from sluice.storage.base import Store
from sluice.storage.mirror import StreamMirror
from sluice.storage.writer import WriteBehind
from sluice.transport.guarded_resolver import check_base_url, system_resolve
from sluice.transport.port import Transport
from sluice.wire.errors import error_json

_log = logging.getLogger("sluice.access")
_T = TypeVar("_T")
_METERED = frozenset(("/v1/chat/completions", "/v1/messages", "/v1/responses", "/v1/embeddings"))
_QUICK = frozenset(
    {"/v1/models", request_list.LIST_PATH, spend_report.SPEND_PATH, COUNT_TOKENS_PATH}
    | {INPUT_TOKENS_PATH}
)


class Shared(Protocol):
    """What this process shares with the others on one Redis (circuits, estimates, the
    response cache's answers), or with the workers of its machine in a SQLite file (the
    answers)."""

    async def start(self) -> None: ...

    async def close(self) -> None: ...


class Gateway:
    """Built by :func:`~sluice.server.compose.create_app`; holds what endpoints need
    (:class:`~.context.GatewayContext`, what they see of it). ``current`` is the
    config's generation; :meth:`reload` swaps it whole."""

    def __init__(
        self,
        *,
        generation: Generation,
        reloader: Reloader | None,
        store: Store,
        transport: Transport,
        shares: Sequence[Shared] = (),
        mirror: StreamMirror | None = None,
        vault: Vault | None,
        seal: AccountSeal,
        new_id: IdFactory,
        wall_clock: Callable[[], float],
        clock: Callable[[], float],
        limits: Limits,
    ) -> None:
        self.current = generation
        self.reloader = reloader
        self.store = store
        self.transport = transport
        self._shares = tuple(shares)
        self._mirror = mirror
        self.vault = vault
        self.new_id = new_id
        self.wall_clock = wall_clock
        self.clock = clock
        self.limits = limits
        self.auth = Authenticator(
            store,
            dev_key_enabled=self.settings.server.dev_key is True,
            clock=clock,
            wall_clock=wall_clock,
        )
        self._decoding = ThreadPoolExecutor(1, thread_name_prefix="sluice-decode")
        self.pacer = Pacer(clock)
        self.memory = ResponseMemory(store, generation.services.log)
        self.relays = Relays(mirror)
        self.routes = Routes(
            self.memory,
            seal,
            msgspec.json.encode(openapi_document()),
            feeds=LiveFeeds(clock, wall_clock),
            counts=CountCache(clock),
            relays=self.relays,
            wall_clock=wall_clock,
        )

    @property
    def settings(self) -> Settings:
        return self.current.settings

    @property
    def services(self) -> Services:
        return self.current.services

    @property
    def catalog(self) -> Catalog:
        return self.current.catalog

    @property
    def models_body(self) -> bytes:
        return self.current.models_body

    @property
    def tenants(self) -> Tenants:
        return self.services.tenants

    def reload(self) -> Reloaded:
        """Read the config file again and swap in what it builds, for new requests
        (requests in flight finish on theirs). :class:`ConfigError`, logged, when the
        file cannot be used: the running config keeps serving."""
        if self.reloader is None:
            raise ConfigError("this gateway was started without a config source to re-read")
        self.current, report = self.reloader.reload(self.current)
        return report

    @property
    def writer(self) -> WriteBehind:
        """The request log and ledger writes, batched off the response path."""
        return self.services.log

    async def start(self) -> None:
        await self.transport.start()
        self.services.log.start()
        self.services.meter.start()
        for share in self._shares:
            await share.start()
        if self._mirror is not None:
            self._mirror.start(self.relays)

    def stop_draining(self) -> None:
        """Shutting down: a client leaving from now on cancels its upstream call."""
        self.services.tasks.stop_draining()

    async def close(self) -> None:
        services = self.services  # the parts below are every generation's
        await services.tasks.close()  # drains settle with what they read so far
        services.repeats.close()  # the counts still waiting to be written
        await self.transport.close()
        await services.limiter.close()
        for share in self._shares:
            await share.close()
        if self._mirror is not None:
            await self._mirror.close()
        await services.log.close()
        await services.meter.close()  # the reservations, once every settlement is written
        await services.telemetry.close()  # the spans still queued are exported
        self._decoding.shutdown(wait=False, cancel_futures=True)

    async def decoded(self, decode: Callable[[], _T], body: bytes | bytearray) -> _T:
        """``decode()`` of a request body: on the event loop when it is small, else on
        the one decoding thread (large bodies one at a time, in order). The decoder
        holds the interpreter's lock while it builds objects, so a thread frees the loop
        only between its steps (the bounds scan, a door's translation); what bounds each
        step is the number of values a body may hold (wire/bounds.py)."""
        if len(body) <= Intake.LARGE_BODY_BYTES:
            return decode()
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._decoding, decode)

    def head_refusal(
        self, target: bytes, headers: list[tuple[bytes, bytes]]
    ) -> tuple[int, str] | None:
        """A large (or chunked) body's request refused on its head, before any of the
        body is read: when its key, known from the cache alone, is past what the tarpit
        lets through (429), or, on a door, its account was found empty (402). Whatever
        this lets in is checked again in full once it is read."""
        path = self.routes.canonical(target.partition(b"?")[0].decode("latin-1"))
        door = self.routes.doors.get(path)
        fields = {n.decode("latin-1").lower(): v.decode("latin-1") for n, v in headers}
        presented = credentials(fields, None if door is None else door.key_header)
        principal = self.auth.cached(presented)
        if principal is None:
            return None
        services = self.services
        if services.tarpit.holding(principal.key_id):
            services.tarpit.hold(principal.key_id, None)  # one more refusal, this one cheap
            return 429, "This key keeps being refused; wait before sending large bodies."
        if path in _METERED and services.meter.out_of_credits(principal):
            return 402, "The account has no credits left; add credits to make requests."
        return None

    async def check_upstream_url(self, url: str) -> None:
        """Where an account's own connection may point (docs/security.md): checked when
        saved, and again on every connect by the transport's guarded pool."""
        await check_base_url(
            url,
            allow_private=self.settings.server.allow_private_upstreams,
            resolve=system_resolve,
        )

    def refused(
        self, status: int, message: str, target: bytes, origin: bytes | None
    ) -> tuple[Headers, bytes]:
        """The response for a request the HTTP layer refused (too big, too slow, malformed),
        in the error shape of the front door its target names, if any, and readable by
        an allowed browser origin."""
        err = connection_error(status, message)
        request_id = self.new_id("req")
        path = self.routes.canonical(target.partition(b"?")[0].decode("latin-1"))
        self.services.metrics.request(path if path in self.routes.paths else "other", status, [])
        if _log.isEnabledFor(logging.INFO):
            shown = printable(path)
            line = RefusalLine(request_id, shown, status)
            _log.info("%s - %s %d", request_id, shown or "-", status, extra={"access": line})
        headers = [("x-request-id", request_id)]
        seen = {} if origin is None else {"origin": origin.decode("latin-1")}
        allowed = allowed_origin(self.settings.server.cors_origins, seen)
        if allowed is not None:
            headers += cors_headers(allowed)
        door = self.routes.doors.get(path)
        if door is None:
            return error_headers(err, headers), error_json(err)
        if door.request_id_header is not None:
            headers.append((door.request_id_header, request_id))
        return error_headers(err, headers), door.error_body(err)

    async def handle(self, request: Request, writer: ResponseWriter) -> None:
        request.path = self.routes.canonical(request.path)  # `/chat/completions` too
        call = Call(request, writer, self.new_id("req"), int(self.wall_clock()), self.clock())
        door = call.door = self.routes.doors.get(request.path)
        if door is not None and door.request_id_header is not None:
            call.headers.append((door.request_id_header, call.request_id))
        status = 200
        method = request.method  # as sent, for the log
        origin = allowed_origin(self.settings.server.cors_origins, request.headers)
        try:
            if origin is not None and is_preflight(method, request.headers):
                status = 204
                await writer.send(
                    204, [*call.headers, *preflight_headers(origin, request.headers)], b""
                )
                return
            if origin is not None:
                call.headers.extend(cors_headers(origin))
            await self._serve(call, *self._endpoint(request))
        except ApiError as err:
            status = err.http_status
            log_unread_refusal(self.services, call, err, self.clock() - call.started)
            if call.principal is not None and self._held(status, request.received):
                await held(self.services, call.principal, err, request.received)
            await answer_failure(writer, err, call.headers, call.door)
        except (ClientGoneError, asyncio.CancelledError):
            status = 499
            if call.exchange is None and writer.interrupted:  # stopping, not the client
                status = answer_shutdown(writer, ShuttingDownError(), call.headers, call.door)
            raise
        except Exception:
            status = 500
            failure = unexpected_failure(call.request_id)
            await answer_failure(writer, failure, call.headers, call.door)
        finally:
            if call.exchange is not None:
                status = call.exchange.status
            elif status == 200 and writer.status:
                status = writer.status  # an endpoint's own status (201 Created)
            path = request.path if request.path in self.routes.paths else "other"
            attempts = [] if call.exchange is None else call.exchange.attempts
            self.services.metrics.request(path, status, attempts)
            if _log.isEnabledFor(logging.INFO):
                line = AccessLine(call, method, status)
                _log.info(
                    "%s %s %s %d%s",
                    call.request_id,
                    method,
                    request.path,
                    status,
                    "".join(f" {a.position}:{a.connection}:{a.outcome}" for a in attempts),
                    extra={"access": line},
                )

    async def _serve(self, call: Call, endpoint: Endpoint, needs_key: bool) -> None:
        """Who asks (the call counted against its request limits), then the endpoint; a
        key's quick calls paced to its share of the loop (:mod:`.pacing`)."""
        if needs_key:
            key_header = None if call.door is None else call.door.key_header
            presented = credentials(call.request.headers, key_header)
            principal = call.principal = await self.auth.authenticate(presented)
            await count_call(self.services, principal, call.headers)
            if self._quick(call.request):
                async with self.pacer.paced(principal.key_id):
                    await endpoint(self, call)
                return
        await endpoint(self, call)

    @staticmethod
    def _held(status: int, body_bytes: int) -> bool:
        """May the tarpit hold this answer to a key's request (:mod:`sluice.exchange.
        refusals`)? A refusal; or a large body that does not decode, which cost the
        gateway its reading and scanning (a small one is as cheap as any answer)."""
        return status in REFUSAL_STATUSES or (
            status == 400 and body_bytes > Intake.LARGE_BODY_BYTES
        )

    @staticmethod
    def _quick(request: Request) -> bool:
        """A key's call that is all work, paced (:mod:`.pacing`). A stored response
        streamed again is a stream: paced, it would put the key's next call to sleep
        ten times as long as it streamed."""
        path = request.path
        if path.startswith(RESPONSES_PREFIX):
            return not streams_again(request.query)
        return path in _QUICK or path.startswith((REQUEST_LOG_PREFIX, MODELS_PREFIX))

    def _endpoint(self, request: Request) -> tuple[Endpoint, bool]:
        methods = self.routes.find(request.path)
        if methods is None:
            raise NotFoundError(f"Unknown request URL: {request.method} {request.path}.")
        if request.method == "HEAD" and "GET" in methods:
            request.method = "GET"  # endpoints serve GET; the writer drops the body
        found = methods.get(request.method)
        if found is None:
            raise MethodNotAllowedError(
                f"Method {request.method} is not allowed here; use {', '.join(methods)}."
            )
        return found
