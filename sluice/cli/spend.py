"""``sluice spend``: what the ledger charged, summed by key, model, provider or UTC day,
read from the database: a table for people (with the total), ``--json`` for scripts
(the shape of ``GET /admin/spend``)."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import click
import msgspec

from sluice.cli.admin import config_option, home_option
from sluice.cli.output import print_table
from sluice.cli.requests import parse_when
from sluice.cli.state import run_on_store
from sluice.core.money import usd_text
from sluice.errors import NotFoundError
from sluice.server.spend_report import group_doc, report_doc
from sluice.storage.base import Store
from sluice.storage.spend import SPEND_BY, SpendAfter, SpendBy, SpendFilters, SpendGroup, SpendTotal

PAGE = 500
"""Groups read per query."""


async def every_group(
    store: Store, filters: SpendFilters, by: SpendBy
) -> tuple[list[SpendGroup], SpendTotal]:
    groups: list[SpendGroup] = []
    after: SpendAfter | None = None
    while True:
        page, total = await store.spend(filters, by, PAGE, after)
        groups.extend(page)
        if len(page) < PAGE:
            return groups, total
        after = page[-1].value


def _table(by: SpendBy, groups: list[SpendGroup], total: SpendTotal) -> Any:
    from rich import box
    from rich.table import Table

    table = Table(box=box.SIMPLE_HEAD, show_footer=True)
    table.add_column(by, footer="total")
    if by == "key":
        table.add_column("prefix")
        table.add_column("label")
    table.add_column("requests", justify="right", footer=str(total.requests))
    table.add_column("spend", justify="right", footer=usd_text(total.spend))
    for group in groups:
        value = group_doc(by, group)[by] or "(not recorded)"
        names = [group.prefix or "", group.label or ""] if by == "key" else []
        spend = usd_text(group.spend)
        table.add_row(str(value), *names, str(group.requests), spend)
    return table


@click.command("spend")
@click.option(
    "--by", "by", type=click.Choice(SPEND_BY), required=True, help="What to sum spend by."
)
@click.option("--json", "as_json", is_flag=True, help="The report as JSON, for scripts.")
@click.option("--since", help="From this time on: an age (30m, 1h, 30d) or ISO 8601.")
@click.option("--until", help="Before this time: an age (30m, 1h, 2d) or ISO 8601.")
@click.option("--account", help="Only this account's spend (its name).")
@click.option("--model", help="Only charges for requests this model served.")
@click.option("--provider", help="Only charges for requests this provider served.")
@config_option
@home_option
def spend_command(
    *,
    by: SpendBy,
    as_json: bool,
    since: str | None,
    until: str | None,
    account: str | None,
    model: str | None,
    provider: str | None,
    config_path: Path | None,
    home: str | None,
) -> None:
    """What the ledger charged, summed by key, model, provider or day (UTC)."""
    now = time.time()
    filters = SpendFilters(
        model=model,
        provider=provider,
        since=None if since is None else parse_when(since, now),
        until=None if until is None else parse_when(until, now),
    )

    async def work(store: Store) -> tuple[list[SpendGroup], SpendTotal]:
        if account is None:
            return await every_group(store, filters, by)
        found = await store.get_account(account)
        if found is None:
            raise NotFoundError(f"No account named '{account}'.")
        return await every_group(store, msgspec.structs.replace(filters, account_id=found.id), by)

    groups, total = run_on_store(config_path, home, work)
    if as_json:
        doc = report_doc(by, filters, groups, total)
        click.echo(msgspec.json.format(msgspec.json.encode(doc), indent=2).decode())
    elif not groups:
        click.echo("nothing charged (with these filters)")
    else:
        print_table(_table(by, groups, total))
