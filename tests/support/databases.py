"""Real databases for tests: a fresh SQLite file, or a fresh PostgreSQL database.

PostgreSQL is expected on 127.0.0.1:5432 (trust auth, as on every dev and CI machine).
When it is unreachable its tests skip with the reason, except under ``CI=true``, where
they fail: CI must run them.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import NoReturn

import asyncpg
import pytest

PG_ADMIN_DSN = os.environ.get("SLUICE_TEST_PG", "postgresql://postgres@127.0.0.1:5432/postgres")


def missing(message: str) -> NoReturn:
    """Something a test needs is not here: its tests skip with ``message``, except under
    ``CI=true``, where they fail."""
    if os.environ.get("CI") == "true":
        pytest.fail(message + " — CI=true requires it")
    pytest.skip(message)


def unavailable(service: str, reason: str) -> NoReturn:
    missing(f"{service} is not reachable ({reason}); start it: see README, 'Test it'")


@asynccontextmanager
async def fresh_postgres() -> AsyncIterator[str]:
    """A new, empty database; its DSN. Dropped afterwards."""
    name = f"sluice_test_{uuid.uuid4().hex[:12]}"
    try:
        admin = await asyncpg.connect(PG_ADMIN_DSN, timeout=3)
    except (OSError, asyncpg.PostgresError) as exc:
        unavailable("PostgreSQL", str(exc))
    try:
        await admin.execute(f'CREATE DATABASE "{name}"')
        yield PG_ADMIN_DSN.rsplit("/", 1)[0] + "/" + name
    finally:
        await admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        await admin.close()
