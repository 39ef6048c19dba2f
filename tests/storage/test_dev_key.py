"""The development key (on SQLite, the embedded default) and the key format."""

from __future__ import annotations

import stat
from pathlib import Path

from sluice.accounts.dev_key import ensure_dev_key
from sluice.accounts.keys import is_key_shaped, key_digest, key_prefix, new_key
from sluice.ids import ordered_id
from sluice.storage.sqlite import SqliteStore


async def open_store(path: Path) -> SqliteStore:
    store = SqliteStore(path)
    await store.open()
    await store.migrate()
    return store


async def test_dev_key_is_created_once_with_mode_0600_and_reused(tmp_path: Path) -> None:
    store = await open_store(tmp_path / "db.sqlite")
    first = await ensure_dev_key(store, tmp_path, ordered_id, bytes(32), 1)
    assert first.created and is_key_shaped(first.key)
    assert stat.S_IMODE((tmp_path / "dev-key").stat().st_mode) == 0o600
    again = await ensure_dev_key(store, tmp_path, ordered_id, b"\x01" * 32, 2)
    assert (again.key, again.created) == (first.key, False)
    principal = await store.find_principal(key_digest(first.key))
    assert principal is not None and principal.is_dev and not principal.metered
    await store.close()
    fresh = await open_store(tmp_path / "other.sqlite")  # a new database, same home
    await ensure_dev_key(fresh, tmp_path, ordered_id, b"\x02" * 32, 3)
    assert await fresh.find_principal(key_digest(first.key)) is not None
    await fresh.close()


def test_key_shape() -> None:
    key = new_key(b"\xff" * 32)
    assert key.startswith("sk-sluice-") and len(key) == len("sk-sluice-") + 40
    assert is_key_shaped(key)
    assert not is_key_shaped(key + "a") and not is_key_shaped(key[:-1] + "-")
    assert key_prefix(key) == key[:18]
    assert new_key(b"\x00" * 32) != new_key(b"\x00" * 31 + b"\x01")
