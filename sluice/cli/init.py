"""``sluice init``: create the gateway's database, or bring an existing one up to date."""

from __future__ import annotations

import asyncio
from pathlib import Path

import click

from sluice.cli.admin import config_option, home_option
from sluice.cli.state import load_settings
from sluice.errors import ConfigError, NoDatabaseError
from sluice.settings import Settings, home_storage_url
from sluice.storage.factory import open_existing_store, open_store, storage_place


@click.command("init")
@config_option
@home_option
def init_command(config_path: Path | None, home: str | None) -> None:
    """Create the database (SQLite in the home, or the [storage] url of --config) and
    apply its migrations; the only command besides `serve` that creates one."""
    try:
        settings = load_settings(config_path, home)
        created, version = asyncio.run(_init(settings))
    except ConfigError as exc:
        raise click.ClickException(str(exc)) from None
    place = storage_place(settings.storage_url)
    if created:
        click.echo(f"created the Sluice database at {place} (schema version {version})")
    else:
        click.echo(f"the Sluice database at {place} exists; schema at version {version}")
    click.echo("`sluice serve` and the other commands use it with the same --home or --config.")


async def _init(settings: Settings) -> tuple[bool, int]:
    """Whether the database was created, and its schema version now."""
    try:
        store = await open_existing_store(settings.storage_url)
        created = False
    except NoDatabaseError:
        if settings.storage_url == home_storage_url(settings.home):
            settings.home.mkdir(parents=True, exist_ok=True, mode=0o700)  # as `serve` makes it
        store = await open_store(settings.storage_url)
        created = True
    try:
        return created, await store.schema_version()
    finally:
        await store.close()
