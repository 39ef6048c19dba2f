"""``sluice init``: create the gateway's database, or bring an existing one up to date."""

from __future__ import annotations

import asyncio
from pathlib import Path

import click

from sluice.cli.admin import config_option, home_option
from sluice.cli.state import storage_of
from sluice.errors import ConfigError, NoDatabaseError
from sluice.settings import home_storage_url
from sluice.storage.factory import open_existing_store, open_store, storage_place


@click.command("init")
@config_option
@home_option
def init_command(config_path: Path | None, home: str | None) -> None:
    """Create the database (SQLite in the home, or the [storage] url of --config) and
    apply its migrations; the only command besides `serve` that creates one."""
    try:
        url, place_home = storage_of(config_path, home)  # no provider key need be set
        created, version = asyncio.run(_init(url, place_home))
    except ConfigError as exc:
        raise click.ClickException(str(exc)) from None
    place = storage_place(url)
    if created:
        click.echo(f"created the Sluice database at {place} (schema version {version})")
    else:
        click.echo(f"the Sluice database at {place} exists; schema at version {version}")
    click.echo("`sluice serve` and the other commands use it with the same --home or --config.")


async def _init(url: str, home: Path) -> tuple[bool, int]:
    """Whether the database was created, and its schema version now."""
    try:
        store = await open_existing_store(url)
        created = False
    except NoDatabaseError:
        if url == home_storage_url(home):
            await asyncio.to_thread(home.mkdir, parents=True, exist_ok=True, mode=0o700)
        store = await open_store(url)
        created = True
    try:
        return created, await store.schema_version()
    finally:
        await store.close()
