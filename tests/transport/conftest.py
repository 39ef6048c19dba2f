"""The upstream client the transport tests send through."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator

import pytest

from sluice.transport.http import HttpTransport


@pytest.fixture
async def transport() -> AsyncIterator[HttpTransport]:
    client = HttpTransport("sluice-test", time.monotonic, allow_private_upstreams=True)
    await client.start()
    yield client
    await client.close()
