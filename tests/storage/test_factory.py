"""Opening storage: ``open_store`` creates, ``open_existing_store`` never does."""

from __future__ import annotations

from pathlib import Path

import asyncpg
import pytest

from sluice.errors import NoDatabaseError
from sluice.storage.factory import open_existing_store, open_store, storage_place
from tests.support.databases import fresh_postgres


async def test_a_missing_sqlite_file_is_refused_and_not_created(tmp_path: Path) -> None:
    path = tmp_path / "home" / "sluice.db"
    with pytest.raises(NoDatabaseError, match=f"no database at {path}"):
        await open_existing_store(f"sqlite:///{path}")
    assert not path.parent.exists()


async def test_an_empty_sqlite_file_is_not_a_sluice_database(tmp_path: Path) -> None:
    path = tmp_path / "empty.db"
    path.touch()
    with pytest.raises(NoDatabaseError, match="holds no Sluice tables"):
        await open_existing_store(f"sqlite:///{path}")


async def test_an_existing_sqlite_database_opens_with_its_accounts(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'sluice.db'}"
    made = await open_store(url)
    await made.create_account("acct_1", "team", metered=True, credits=5, now=1)
    await made.close()
    store = await open_existing_store(url)
    try:
        found = await store.get_account("team")
        assert found is not None and found.balance == 5
    finally:
        await store.close()


async def test_postgres_without_sluice_tables_is_refused_until_created() -> None:
    async with fresh_postgres() as dsn:
        with pytest.raises(NoDatabaseError, match="holds no Sluice tables"):
            await open_existing_store(dsn)
        admin = await asyncpg.connect(dsn)
        try:  # the refusal left the database as it was: no table at all
            assert (
                await admin.fetchval("SELECT count(*) FROM pg_tables WHERE schemaname = 'public'")
                == 0
            )
        finally:
            await admin.close()
        await (await open_store(dsn)).close()
        store = await open_existing_store(dsn)
        assert await store.schema_version() > 0
        await store.close()


async def test_an_unreachable_postgres_is_no_database() -> None:
    with pytest.raises(
        NoDatabaseError, match=r"no database at postgresql://u:\*\*\*@127\.0\.0\.1:1/x"
    ):
        await open_existing_store("postgresql://u:secret@127.0.0.1:1/x")


@pytest.mark.parametrize(
    ("url", "shown"),
    [
        (
            "postgresql://app:s3cret@db.internal:5432/sluice",
            "postgresql://app:***@db.internal:5432/sluice",
        ),
        ("postgresql://app@db/sluice", "postgresql://app@db/sluice"),
        ("postgres://:pw@db/sluice?sslmode=require", "postgres://:***@db/sluice?sslmode=require"),
        ("sqlite:////srv/sluice/sluice.db", "/srv/sluice/sluice.db"),
    ],
    ids=["password-masked", "no-password", "empty-user-and-query", "sqlite-absolute"],
)
def test_storage_place_never_shows_a_password(url: str, shown: str) -> None:
    assert storage_place(url) == shown


def test_a_relative_sqlite_path_is_shown_absolute(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    assert storage_place("sqlite:///.sluice/sluice.db") == str(tmp_path / ".sluice" / "sluice.db")
