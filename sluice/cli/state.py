"""Where the gateway's state is, found the one way ``serve``, ``init`` and every command
on the database share: the config file's ``[storage] url`` (``--config``), else the
SQLite file in ``--home``, ``$SLUICE_HOME`` or ``./.sluice``. A command on the database
reads only the file's ``[storage]``: the provider keys its connections name need not be
in the operator's shell.

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
    workers: int | None = None,
) -> Settings:
    """The settings of ``--config`` / ``--home`` against this environment (``host``,
    ``port``, ``workers``: the command line's); raises :class:`ConfigError`."""
    env = dict(os.environ)
    file = read_config_file(config_path) if config_path else FileConfig()
    place = resolve_home(home, env)
    return build_settings(file, env, place, host=host, port=port, workers=workers)


def storage_of(config_path: Path | None, home: str | None) -> tuple[str, Path]:
    """The storage URL the gateway of ``--config`` / ``--home`` uses, and its home: the
    file's ``[storage]`` only, so a command on the database needs none of the provider
    keys the file's connections name; raises :class:`ConfigError`."""
    env = dict(os.environ)
    file = read_config_file(config_path) if config_path else FileConfig()
    place = resolve_home(home, env)
    return file.storage.url or home_storage_url(place), place


def run_on_store(
    config_path: Path | None, home: str | None, work: Callable[[Store], Awaitable[_T]]
) -> _T:
    """``work`` on the gateway's existing database, then close it. Errors become
    click's: :class:`NoDatabaseExit` when there is no database, exit 1 otherwise."""
    try:
        url, place = storage_of(config_path, home)
    except ConfigError as exc:
        raise click.ClickException(str(exc)) from None

    async def main() -> _T:
        store = await open_existing_store(url)
        try:
            return await work(store)
        finally:
            await store.close()

    try:
        return asyncio.run(main())
    except NoDatabaseError as exc:
        where = _source(url, place, config_path, home)
        raise NoDatabaseExit(refusal(str(exc), where)) from None
    except (ApiError, ConfigError) as exc:
        raise click.ClickException(str(exc)) from None


def refusal(problem: str, source: str) -> str:
    """What was not found, where the place came from (``source``), and how to point
    elsewhere."""
    return (
        f"{problem} (from {source}).\n"
        "Point this command at the gateway's state with --home DIR or "
        f"{HOME_ENV}=DIR (the directory `sluice serve` uses), or --config FILE (the "
        "gateway's config: its [storage] url is used); or create a database there "
        "with `sluice init` and the same options."
    )


def _source(url: str, place: Path, config_path: Path | None, home: str | None) -> str:
    """How the storage URL was chosen, in the order :func:`resolve_home` follows."""
    if url != home_storage_url(place):
        return f"the [storage] url of {config_path}"
    if home:
        return f"--home {home}"
    if os.environ.get(HOME_ENV):
        return f"{HOME_ENV}={os.environ[HOME_ENV]}"
    return f"the default home ./{DEFAULT_HOME}: no --home given, {HOME_ENV} not set"
