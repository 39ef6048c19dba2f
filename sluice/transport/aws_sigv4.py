"""AWS SigV4 signing with botocore's signer and credential chain (never hand-written).

The chain (environment, shared files, SSO, instance metadata, …) can block on I/O, so
credentials are resolved in a worker thread and their frozen form is reused for a
minute; refreshable credentials are re-read after that.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from botocore.auth import SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.credentials import Credentials, ReadOnlyCredentials
from botocore.session import get_session

from sluice.core.upstream_request import AwsSigning, UpstreamRequest
from sluice.errors import UpstreamError

_REUSE_SECONDS = 60.0


class AwsSigner:
    def __init__(self, clock: Callable[[], float]) -> None:
        self._clock = clock
        self._source: Credentials | None = None
        self._frozen: ReadOnlyCredentials | None = None
        self._read_at = 0.0

    def _resolve(self) -> ReadOnlyCredentials | None:
        if self._source is None:
            self._source = get_session().get_credentials()
        if self._source is None:
            return None
        frozen: ReadOnlyCredentials = self._source.get_frozen_credentials()
        return frozen

    async def credentials(self) -> ReadOnlyCredentials:
        now = self._clock()
        if self._frozen is None or now - self._read_at > _REUSE_SECONDS:
            self._frozen = await asyncio.to_thread(self._resolve)
            self._read_at = now
        if self._frozen is None:
            raise UpstreamError(
                "No AWS credentials found for this connection.", code="upstream_no_credentials"
            )
        return self._frozen

    def secrets(self) -> tuple[str, ...]:
        """The credentials signing now (for redaction): access key id, secret, token."""
        frozen = self._frozen
        if frozen is None:
            return ()
        return tuple(s for s in (frozen.access_key, frozen.secret_key, frozen.token) if s)

    async def sign(self, req: UpstreamRequest, signing: AwsSigning) -> dict[str, str]:
        """The request's headers with ``Authorization``, ``X-Amz-Date`` and friends."""
        frozen = await self.credentials()
        creds = Credentials(frozen.access_key or "", frozen.secret_key or "", frozen.token)
        aws = AWSRequest(method=req.method, url=req.url, data=req.body, headers=req.headers)
        SigV4Auth(creds, signing.service, signing.region).add_auth(aws)
        return {name.lower(): str(value) for name, value in aws.headers.items()}
