"""``sluice accounts|keys|ledger``: operate on the storage of ``--config`` / ``SLUICE_HOME``."""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import Awaitable, Callable
from decimal import Decimal
from pathlib import Path
from typing import TypeVar

import click

from sluice.accounts.keys import key_digest, key_prefix, new_key
from sluice.config import FileConfig, read_config_file
from sluice.errors import ApiError, ConfigError
from sluice.ids import random_id
from sluice.metering.charges import NANO_PER_USD, nano_from_usd_text
from sluice.settings import build_settings, resolve_home
from sluice.storage.base import Account, Mismatch, Store
from sluice.storage.factory import open_store

_T = TypeVar("_T")

config_option = click.option(
    "--config",
    "config_path",
    type=click.Path(dir_okay=False, path_type=Path),
    help="The gateway's config file (its [storage] is used).",
)
home_option = click.option(
    "--home", default=None, help="State directory [default: $SLUICE_HOME or ./.sluice]."
)


def usd_to_nano(text: str) -> int:
    try:
        return nano_from_usd_text(text)
    except ValueError as exc:
        raise click.BadParameter(str(exc)) from None


def nano_to_usd(nano: int) -> str:
    return f"{Decimal(nano) / NANO_PER_USD:.9f}"


def _run(config_path: Path | None, home: str | None, work: Callable[[Store], Awaitable[_T]]) -> _T:
    env = dict(os.environ)
    try:
        file = read_config_file(config_path) if config_path else FileConfig()
        settings = build_settings(file, env, resolve_home(home, env))
    except ConfigError as exc:
        raise click.ClickException(str(exc)) from None

    async def main() -> _T:
        store = await open_store(settings.storage_url)
        try:
            return await work(store)
        finally:
            await store.close()

    try:
        return asyncio.run(main())
    except (ApiError, ConfigError) as exc:
        raise click.ClickException(str(exc)) from None


def _show(account: Account) -> str:
    return "\n".join(
        [
            f"account:     {account.name} ({account.id})",
            f"metered:     {'yes' if account.metered else 'no'}",
            f"balance:     ${nano_to_usd(account.balance)}",
            f"held:        ${nano_to_usd(account.held)} in {account.open_holds} open holds",
            f"available:   ${nano_to_usd(account.available)}",
        ]
    )


@click.group()
def accounts() -> None:
    """Accounts and their credits."""


@accounts.command("create")
@click.argument("name")
@click.option(
    "--credits",
    "credits_usd",
    default="0",
    show_default=True,
    help="Starting credits in USD; the account is credit-metered.",
)
@config_option
@home_option
def accounts_create(
    name: str, credits_usd: str, config_path: Path | None, home: str | None
) -> None:
    """Create a credit-metered account."""
    amount = usd_to_nano(credits_usd)

    async def work(store: Store) -> Account:
        return await store.create_account(
            random_id("acct"), name, metered=True, credits=amount, now=int(time.time())
        )

    click.echo(_show(_run(config_path, home, work)))


@accounts.command("credit")
@click.argument("name")
@click.argument("amount_usd")
@config_option
@home_option
def accounts_credit(name: str, amount_usd: str, config_path: Path | None, home: str | None) -> None:
    """Add credits (a negative amount removes them), through the ledger."""
    amount = usd_to_nano(amount_usd)

    async def work(store: Store) -> Account:
        return await store.add_credits(name, amount, now=int(time.time()), note="cli")

    click.echo(_show(_run(config_path, home, work)))


@accounts.command("show")
@click.argument("name")
@config_option
@home_option
def accounts_show(name: str, config_path: Path | None, home: str | None) -> None:
    """Balance, open holds and what is available."""

    async def work(store: Store) -> Account | None:
        return await store.get_account(name)

    account = _run(config_path, home, work)
    if account is None:
        raise click.ClickException(f"no account named {name!r}")
    click.echo(_show(account))


@click.group()
def keys() -> None:
    """API keys (stored hashed; only a short prefix stays readable)."""


@keys.command("create")
@click.option("--account", "account_name", required=True, help="The account the key uses.")
@click.option("--name", "label", default=None, help="A label for listings.")
@config_option
@home_option
def keys_create(
    account_name: str, label: str | None, config_path: Path | None, home: str | None
) -> None:
    """Create a key and print it (the only time it is shown)."""
    key = new_key(os.urandom(32))

    async def work(store: Store) -> None:
        account = await store.get_account(account_name)
        if account is None:
            raise click.ClickException(f"no account named {account_name!r}")
        await store.add_key(
            random_id("key"),
            account_id=account.id,
            key_digest=key_digest(key),
            prefix=key_prefix(key),
            name=label,
            now=int(time.time()),
        )

    _run(config_path, home, work)
    click.echo(key)


@keys.command("list")
@click.option("--account", "account_name", required=True)
@config_option
@home_option
def keys_list(account_name: str, config_path: Path | None, home: str | None) -> None:
    """The account's keys by prefix (never the keys themselves)."""

    async def work(store: Store) -> list[str]:
        account = await store.get_account(account_name)
        if account is None:
            raise click.ClickException(f"no account named {account_name!r}")
        return [
            f"{k.prefix}…  {k.name or '-'}  {'revoked' if k.revoked_at else 'live'}"
            for k in await store.list_keys(account.id)
        ]

    for line in _run(config_path, home, work):
        click.echo(line)


@keys.command("revoke")
@click.argument("prefix")
@config_option
@home_option
def keys_revoke(prefix: str, config_path: Path | None, home: str | None) -> None:
    """Revoke every live key starting with PREFIX (at least `sk-sluice-` + 4 characters)."""
    if len(prefix) < len("sk-sluice-") + 4:
        raise click.BadParameter("give at least `sk-sluice-` and 4 more characters")

    async def work(store: Store) -> int:
        return await store.revoke_keys(prefix, int(time.time()))

    count = _run(config_path, home, work)
    if count == 0:
        raise click.ClickException(f"no live key starts with {prefix!r}")
    click.echo(f"revoked {count} key{'s' if count > 1 else ''}")


@click.group()
def ledger() -> None:
    """The credits ledger."""


def _mismatch_line(m: Mismatch) -> str:
    if m.what == "negative_charges":
        return f"{m.account}: charges credited {nano_to_usd(m.stored)} (a charge is never negative)"
    if m.what == "charges_beyond_holds":
        return f"{m.account}: holds charged {nano_to_usd(m.stored)} beyond their amounts"
    return (
        f"{m.account}: {m.what} is {nano_to_usd(m.stored)}, ledger says {nano_to_usd(m.expected)}"
    )


@ledger.command("reconcile")
@config_option
@home_option
def ledger_reconcile(config_path: Path | None, home: str | None) -> None:
    """Reclaim expired holds, then check every balance against its ledger (exit 0 only
    when all match)."""

    async def work(store: Store) -> tuple[int, list[str]]:
        reclaimed = await store.reclaim_expired(int(time.time()))
        return reclaimed, [_mismatch_line(m) for m in await store.reconcile()]

    reclaimed, problems = _run(config_path, home, work)
    if reclaimed:
        click.echo(f"reclaimed {reclaimed} expired holds")
    for line in problems:
        click.echo(line, err=True)
    if problems:
        raise SystemExit(1)
    click.echo("every balance equals its ledger")
