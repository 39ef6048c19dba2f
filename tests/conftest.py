from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from tests.support.fake_openai import FakeOpenAI


@pytest.fixture
async def fake() -> AsyncIterator[FakeOpenAI]:
    server = FakeOpenAI()
    await server.start()
    try:
        yield server
    finally:
        await server.close()
