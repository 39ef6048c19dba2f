"""``sluice accounts|ledger``: operate on the storage of ``--config`` / ``SLUICE_HOME``."""

from __future__ import annotations

import re
import time
from collections.abc import Awaitable, Callable
from functools import partial
from pathlib import Path
from typing import Any, TypeVar

import click
import msgspec

from sluice.accounts.policy import ACCOUNT_NAME, AllowanceChanges, apply_account_changes
from sluice.cli.allowance import allowance_changes, allowance_options, checked
from sluice.cli.state import run_on_store
from sluice.core.money import nano_from_usd_text, usd_text
from sluice.core.principal import NO_ACCOUNT_POLICY, AccountPolicy
from sluice.errors import ApiError
from sluice.ids import ordered_id
from sluice.storage.base import Account, Store
from sluice.storage.reconcile import Mismatch

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


def _run(config_path: Path | None, home: str | None, work: Callable[[Store], Awaitable[_T]]) -> _T:
    """``work`` on the gateway's existing database (exit 2 when there is none)."""
    return run_on_store(config_path, home, work)


def _show(account: Account) -> str:
    return "\n".join(
        [
            f"account:     {account.name} ({account.id})",
            f"metered:     {'yes' if account.metered else 'no'}",
            f"balance:     {usd_text(account.balance)}",
            f"held:        {usd_text(account.held)} in {account.open_holds} open holds",
            f"available:   {usd_text(account.available)}",
            *_allowance_lines(account.policy),
        ]
    )


def _allowance_lines(policy: AccountPolicy) -> list[str]:
    lines = []
    if policy.budget is not None:
        lines.append(f"budget:      {usd_text(policy.budget)} ({policy.budget_period})")
    for name in ("rpm", "tpm"):
        value = getattr(policy, name)
        if value is not None:
            lines.append(f"{name}:         {value} per minute")
    lines += [f"metadata:    {k}={v}" for k, v in policy.metadata.items()]
    return lines


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
@allowance_options
@config_option
@home_option
def accounts_create(
    name: str, credits_usd: str, config_path: Path | None, home: str | None, **allowance: Any
) -> None:
    """Create a credit-metered account, with its own budget and limits if given."""
    if re.fullmatch(ACCOUNT_NAME, name) is None:
        raise click.BadParameter("1-64 letters, digits, . _ -, a letter or digit first")
    amount = usd_to_nano(credits_usd)
    if amount < 0:  # the admin API's rule; `accounts credit` may take credits away
        raise click.BadParameter("starting credits cannot be negative", param_hint="'--credits'")
    policy = _policy(checked(AllowanceChanges, allowance_changes(**allowance)), NO_ACCOUNT_POLICY)

    async def work(store: Store) -> Account:
        return await store.create_account(
            ordered_id("acct"),
            name,
            metered=True,
            credits=amount,
            now=int(time.time()),
            policy=policy,
        )

    click.echo(_show(_run(config_path, home, work)))


@accounts.command("update")
@click.argument("name")
@allowance_options
@config_option
@home_option
def accounts_update(
    name: str, config_path: Path | None, home: str | None, **allowance: Any
) -> None:
    """Change an account's budget, per-minute limits or metadata (`none` clears one);
    its keys' next requests see it (a running gateway within 5 s)."""
    changes = checked(AllowanceChanges, allowance_changes(**allowance))

    async def work(store: Store) -> Account:
        account = await store.get_account(name)
        if account is None:
            raise click.ClickException(f"no account named {name!r}")
        policy = await store.change_account(account.id, partial(_policy, changes))
        if policy is None:
            raise click.ClickException(f"no account named {name!r}")
        return msgspec.structs.replace(account, policy=policy)

    click.echo(_show(_run(config_path, home, work)))


def _policy(changes: AllowanceChanges, policy: AccountPolicy) -> AccountPolicy:
    try:
        return apply_account_changes(changes, policy)
    except ApiError as err:
        raise click.BadParameter(err.message) from None


@accounts.command("credit", context_settings={"ignore_unknown_options": True})
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
def ledger() -> None:
    """The credits ledger."""


def _mismatch_line(m: Mismatch) -> str:
    if m.what == "negative_charges":
        return f"{m.account}: charges credited {usd_text(m.stored)} (a charge is never negative)"
    if m.what == "charges_beyond_holds":
        return f"{m.account}: holds charged {usd_text(m.stored)} beyond their amounts"
    return f"{m.account}: {m.what} is {usd_text(m.stored)}, ledger says {usd_text(m.expected)}"


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
