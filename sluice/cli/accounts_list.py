"""``sluice accounts list``: every account, a table for people or JSON for scripts."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import click

from sluice.accounts.policy import account_spent, allowance_doc
from sluice.cli.admin import accounts, config_option, home_option
from sluice.cli.output import print_table
from sluice.cli.state import run_on_store
from sluice.core.money import usd_from_nano, usd_text
from sluice.storage.base import Account, Store

PAGE = 500
"""Accounts read per query while listing them all."""


async def all_accounts(store: Store, page: int = PAGE) -> list[Account]:
    """Every account in account-id order, read ``page`` at a time."""
    found: list[Account] = []
    while True:
        batch = await store.list_accounts(page, found[-1].id if found else None)
        found.extend(batch)
        if len(batch) < page:
            return found


async def with_spent(store: Store) -> list[tuple[Account, int | None]]:
    """Every account, and what it spent in its budget's period where it has a budget
    (as the admin API's listing gives it)."""
    now = int(time.time())
    return [
        (a, None if a.policy.budget is None else await account_spent(store, a, now))
        for a in await all_accounts(store)
    ]


def account_doc(account: Account, spent: int | None = None) -> dict[str, object]:
    """One account for scripts: the fields of the admin API's account, and when it was
    created (Unix seconds)."""
    return {
        "id": account.id,
        "name": account.name,
        "metered": account.metered,
        "is_dev": account.is_dev,
        "balance": usd_from_nano(account.balance),
        "held": usd_from_nano(account.held),
        "available": usd_from_nano(account.available),
        "open_holds": account.open_holds,
        **allowance_doc(account.policy, spent),
        "created_at": account.created_at,
    }


def _table(listed: list[tuple[Account, int | None]]) -> Any:
    from rich import box
    from rich.table import Table

    table = Table(box=box.SIMPLE_HEAD)
    columns = ("name", "metered", "balance", "held", "available", "holds", "spent (budget)")
    for name in (*columns, "created (UTC)"):
        table.add_column(name, justify="left" if name == "name" else "right", no_wrap=True)
    for a, spent in listed:
        budget = a.policy.budget
        table.add_row(
            a.name,
            "yes" if a.metered else "no",
            usd_text(a.balance),
            usd_text(a.held),
            usd_text(a.available),
            str(a.open_holds),
            "-" if spent is None or budget is None else f"{usd_text(spent)} of {usd_text(budget)}",
            time.strftime("%Y-%m-%d %H:%M", time.gmtime(a.created_at)),
        )
    return table


@click.command("list")
@click.option("--json", "as_json", is_flag=True, help="A JSON array for scripts.")
@config_option
@home_option
def accounts_list(as_json: bool, config_path: Path | None, home: str | None) -> None:
    """Every account with its balance, holds and what is available."""
    listed = run_on_store(config_path, home, with_spent)
    if as_json:
        click.echo(json.dumps([account_doc(a, spent) for a, spent in listed], indent=2))
    elif not listed:
        click.echo("no accounts yet: `sluice accounts create NAME --credits USD`")
    else:
        print_table(_table(listed))


def accounts_group() -> click.Group:
    """``sluice accounts`` with its ``list`` subcommand (defined here, beside the group's
    other subcommands in :mod:`sluice.cli.admin`)."""
    accounts.add_command(accounts_list)
    return accounts
