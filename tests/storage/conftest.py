from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from sluice.storage.base import Store
from sluice.storage.factory import open_store
from tests.support.databases import fresh_postgres


@pytest.fixture(params=["sqlite", "postgres"])
async def store(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Store]:
    """The same suite against both backends."""
    if request.param == "sqlite":
        opened = await open_store(f"sqlite:///{tmp_path / 'test.db'}")
        try:
            yield opened
        finally:
            await opened.close()
        return
    async with fresh_postgres() as dsn:
        opened = await open_store(dsn)
        try:
            yield opened
        finally:
            await opened.close()
