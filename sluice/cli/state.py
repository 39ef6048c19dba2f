"""Where the gateway's state is, found the one way ``serve``, ``init`` and every command
on the database share: the config file's ``[storage] url`` (``--config``), else the
SQLite file in ``--home``, ``$SLUICE_HOME`` or ``./.sluice``.

Only ``serve`` and ``init`` create a database. Any other command that finds none (no
file, a server it cannot reach, a database without Sluice's schema) exits 2, saying
where it looked and how to point it elsewhere.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import TypeVar

import click

from sluice.config import FileConfig, read_config_file
from sluice.errors import ApiError, ConfigError, NoDatabaseError
from sluice.settings import (
    DEFAULT_HOME,
    HOME_ENV,
    Settings,
    build_settings,
    home_storage_url,
    resolve_home,
)
from sluice.storage.base import Store
from sluice.storage.factory import open_existing_store

_T = TypeVar("_T")
NO_DATABASE_EXIT = 2


class NoDatabaseExit(click.ClickException):
    """The command found no database where it looked (exit status 2)."""

    exit_code = NO_DATABASE_EXIT


def load_settings(
    config_path: Path | None,
    home: str | None,
    *,
    host: str | None = None,
    port: int | None = None,
) -> Settings:
    """The settings of ``--config`` / ``--home`` against this environment; raises
    :class:`ConfigError`."""
    env = dict(os.environ)
    file = read_config_file(config_path) if config_path else FileConfig()
    return build_settings(file, env, resolve_home(home, env), host=host, port=port)


def run_on_store(
    config_path: Path | None, home: str | None, work: Callable[[Store], Awaitable[_T]]
) -> _T:
    """``work`` on the gateway's existing database, then close it. Errors become
    click's: :class:`NoDatabaseExit` when there is no database, exit 1 otherwise."""
    try:
        settings = load_settings(config_path, home)
    except ConfigError as exc:
        raise click.ClickException(str(exc)) from None

    async def main() -> _T:
        store = await open_existing_store(settings.storage_url)
        try:
            return await work(store)
        finally:
            await store.close()

    try:
        return asyncio.run(main())
    except NoDatabaseError as exc:
        raise NoDatabaseExit(refusal(str(exc), settings, config_path, home)) from None
    except (ApiError, ConfigError) as exc:
        raise click.ClickException(str(exc)) from None


def refusal(problem: str, settings: Settings, config_path: Path | None, home: str | None) -> str:
    """What was not found, where the place came from, and how to point elsewhere."""
    return (
        f"{problem} (from {_source(settings, config_path, home)}).\n"
        "Point this command at the gateway's state with --home DIR or "
        f"{HOME_ENV}=DIR (the directory `sluice serve` uses), or --config FILE (the "
        "gateway's config: its [storage] url is used); or create a database there "
        "with `sluice init` and the same options."
    )


def _source(settings: Settings, config_path: Path | None, home: str | None) -> str:
    """How the storage URL was chosen, in the order :func:`resolve_home` follows."""
    if settings.storage_url != home_storage_url(settings.home):
        return f"the [storage] url of {config_path}"
    if home:
        return f"--home {home}"
    if os.environ.get(HOME_ENV):
        return f"{HOME_ENV}={os.environ[HOME_ENV]}"
    return f"the default home ./{DEFAULT_HOME}: no --home given, {HOME_ENV} not set"
