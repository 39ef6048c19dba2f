"""The development key: an unmetered ``dev`` account and one key, kept in
``$SLUICE_HOME/dev-key`` (mode 0600) so a newcomer can curl the gateway at once."""

from __future__ import annotations

import os
from pathlib import Path

import msgspec

from sluice.accounts.keys import is_key_shaped, key_digest, key_prefix, new_key
from sluice.ids import IdFactory
from sluice.storage.base import Store

DEV_ACCOUNT = "dev"
DEV_KEY_FILE = "dev-key"


class DevKey(msgspec.Struct, frozen=True):
    key: str
    path: Path
    created: bool


def _read_key(path: Path) -> str | None:
    try:
        text = path.read_text(encoding="ascii").strip()
    except (OSError, UnicodeDecodeError):
        return None
    return text if is_key_shaped(text) else None


def _write_key(path: Path, key: str) -> None:
    tmp = path.with_name(path.name + ".tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        os.fchmod(fd, 0o600)
        os.write(fd, (key + "\n").encode("ascii"))
    finally:
        os.close(fd)
    os.replace(tmp, path)


async def ensure_dev_key(
    store: Store, home: Path, new_id: IdFactory, random_bytes: bytes, now: int
) -> DevKey:
    """Reuse the key in the file (re-registering it if the database is new), or make one."""
    path = home / DEV_KEY_FILE
    key = _read_key(path)
    created = key is None
    if key is None:
        key = new_key(random_bytes)
        _write_key(path, key)
    elif path.stat().st_mode & 0o077:
        os.chmod(path, 0o600)
    account = await store.ensure_account(
        new_id("acct"), DEV_ACCOUNT, metered=False, is_dev=True, now=now
    )
    await store.add_key(
        new_id("key"),
        account_id=account,
        key_digest=key_digest(key),
        prefix=key_prefix(key),
        name="dev",
        now=now,
    )
    return DevKey(key, path, created)
