"""Where a Bedrock Runtime call goes and how it is authenticated (Converse and
InvokeModel alike).

The model id goes in the path percent-encoded as one segment (inference-profile ARNs
hold ``:`` and ``/``). With an API key on the connection (Bedrock API keys) the
request carries ``Authorization: Bearer``; otherwise it asks the transport for SigV4
with the connection's region, or the region named by a standard runtime host.
"""

from __future__ import annotations

import re
from urllib.parse import quote, urlsplit

from sluice.core.connection import Target
from sluice.core.upstream_request import AwsSigning, UpstreamRequest
from sluice.errors import UpstreamError

SIGNING_SERVICE = "bedrock"
_RUNTIME_HOST = re.compile(r"^bedrock-runtime(?:-fips)?\.([a-z0-9-]+)\.amazonaws\.com$")


def signing_region(target: Target) -> str:
    conn = target.connection
    if conn.region:
        return conn.region
    found = _RUNTIME_HOST.match(urlsplit(conn.base_url).hostname or "")
    if found is None:
        raise UpstreamError(
            f"Connection {conn.id!r} needs a region to sign Bedrock requests.",
            code="upstream_misconfigured",
        )
    return found.group(1)


def model_request(
    target: Target, action: str, headers: dict[str, str], body: bytes, *, stream: bool = False
) -> UpstreamRequest:
    """``POST {base}/model/{model}/{action}`` (``converse``, ``invoke`` …) with the
    connection's credentials: its key as a bearer token, else SigV4 asked for."""
    conn = target.connection
    model = quote(target.native_model, safe="")
    signing = None
    if conn.api_key is not None:
        headers["authorization"] = "Bearer " + conn.api_key.reveal()
    else:
        signing = AwsSigning(service=SIGNING_SERVICE, region=signing_region(target))
    return UpstreamRequest(
        method="POST",
        url=f"{conn.base_url.rstrip('/')}/model/{model}/{action}",
        headers=headers,
        body=body,
        stream=stream,
        aws_sigv4=signing,
    )
