"""The scrape listener (``[server] metrics_listen``, docs/deploy.md): ``GET``/``HEAD
/metrics`` without a key, for a Prometheus scraper on a private address. Every other
path is 404 and every other method 405; nothing else of the gateway is reachable here,
and these requests are not counted in ``sluice_requests_total``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from sluice.errors import ApiError, MethodNotAllowedError, NotFoundError
from sluice.exchange.heads import error_headers
from sluice.server.message import Request, ResponseWriter
from sluice.server.responses import PROMETHEUS
from sluice.wire.errors import error_json

if TYPE_CHECKING:
    from sluice.server.context import GatewayContext

METRICS_PATH = "/metrics"


class Scrape:
    """The scrape listener's handler, over the gateway's current metrics."""

    __slots__ = ("_gateway",)

    def __init__(self, gateway: GatewayContext) -> None:
        self._gateway = gateway

    async def handle(self, request: Request, writer: ResponseWriter) -> None:
        headers = [("x-request-id", self._gateway.new_id("req"))]
        err: ApiError
        if request.path != METRICS_PATH:
            err = NotFoundError(f"Unknown request URL: {request.method} {request.path}.")
        elif request.method not in ("GET", "HEAD"):
            err = MethodNotAllowedError(f"Method {request.method} is not allowed here; use GET.")
        else:
            gw = self._gateway
            body = await gw.services.metrics.scrape(gw.store, gw.services.tasks)
            await writer.send(200, [*headers, PROMETHEUS], body)
            return
        await writer.send(err.http_status, error_headers(err, headers), error_json(err))
