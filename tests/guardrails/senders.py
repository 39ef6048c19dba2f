"""A sender for guardrails whose rules never call a webhook."""

from __future__ import annotations

from sluice.core.connection import Timeouts
from sluice.core.upstream_request import UpstreamRequest
from sluice.transport.port import UpstreamResponse


class NoWebhooks:
    async def send(self, req: UpstreamRequest, timeouts: Timeouts) -> UpstreamResponse:
        raise AssertionError(f"no webhook call expected, got {req.url}")


NO_WEBHOOKS = NoWebhooks()
