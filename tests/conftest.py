from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from tests.support.fake_openai import openai_default
from tests.support.fake_upstream import FakeUpstream

pytest_plugins = ["tests.support.task_dump"]


@pytest.fixture
async def fake() -> AsyncIterator[FakeUpstream]:
    """A fake upstream that answers unscripted requests with a short OpenAI stream."""
    server = openai_default(FakeUpstream())
    await server.start()
    try:
        yield server
    finally:
        await server.close()
