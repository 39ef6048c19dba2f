"""``sluice requests list``: the request log newest first, read from the database: a
table for people, ``--json`` for scripts."""

from __future__ import annotations

import re
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import click
import msgspec

from sluice.cli.admin import config_option, home_option
from sluice.cli.output import print_table
from sluice.cli.state import run_on_store
from sluice.errors import NotFoundError
from sluice.storage.base import (
    REQUEST_STATUSES,
    RequestFilters,
    RequestPosition,
    RequestRecord,
    Store,
)

PAGE = 500
"""Rows read per query."""
_AGE = re.compile(r"([0-9]{1,9})([smhdw])")
_UNITS = "smhdw"
_UNIT_SECONDS = (1, 60, 3600, 86400, 604800)


def parse_when(text: str, now: float) -> int:
    """``--since`` / ``--until`` as Unix seconds: an age before ``now`` (``90s``,
    ``30m``, ``1h``, ``2d``, ``1w``) or an ISO 8601 time (UTC unless it names a zone)."""
    age = _AGE.fullmatch(text)
    if age:
        return int(now) - int(age[1]) * _UNIT_SECONDS[_UNITS.index(age[2])]
    try:
        when = datetime.fromisoformat(text)
    except ValueError:
        raise click.BadParameter(
            f"{text!r} is neither an age (30m, 1h, 2d) nor an ISO 8601 time."
        ) from None
    return int((when if when.tzinfo else when.replace(tzinfo=UTC)).timestamp())


async def newest_requests(
    store: Store, filters: RequestFilters, limit: int, page: int = PAGE
) -> list[RequestRecord]:
    """Up to ``limit`` rows newest first, read ``page`` at a time."""
    found: list[RequestRecord] = []
    after: RequestPosition | None = None
    while len(found) < limit:
        want = min(page, limit - len(found))
        batch = await store.list_requests(filters, want, after)
        found.extend(batch)
        if len(batch) < want:
            break
        after = (batch[-1].created_at, batch[-1].id)
    return found


def _table(records: list[RequestRecord]) -> Any:
    from rich import box
    from rich.table import Table

    table = Table(box=box.SIMPLE_HEAD)
    columns = ("time (UTC)", "id", "account", "key", "model", "provider", "status", "http")
    for name in (*columns, "tokens in/out", "cost", "ms"):
        table.add_column(name, justify="right" if name in ("http", "cost", "ms") else "left")
    for r in records:
        model = r.requested_model or ""
        if r.served_model and r.served_model != model:
            model = f"{model} -> {r.served_model}"
        table.add_row(
            time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(r.created_at)),
            r.id,
            r.account_id,
            r.key_id,
            model,
            r.provider or "",
            r.status,
            str(r.http_status),
            f"{r.prompt_tokens}/{r.completion_tokens}",
            "" if r.cost is None else f"${r.cost:.6f}",
            f"{r.duration_ms:.0f}",
        )
    return table


@click.group()
def requests() -> None:
    """The request log."""


@requests.command("list")
@click.option("--json", "as_json", is_flag=True, help="A JSON array for scripts.")
@click.option("--since", help="From this time on: an age (30m, 1h, 2d) or ISO 8601.")
@click.option("--until", help="Before this time: an age (30m, 1h, 2d) or ISO 8601.")
@click.option(
    "--status", type=click.Choice(REQUEST_STATUSES), help="Only requests with this status."
)
@click.option("--account", help="Only this account's requests (its name).")
@click.option("--model", help="Only requests that asked for or were served this model.")
@click.option("--limit", type=click.IntRange(min=1), default=50, show_default=True)
@config_option
@home_option
def requests_list(
    *,
    as_json: bool,
    since: str | None,
    until: str | None,
    status: str | None,
    account: str | None,
    model: str | None,
    limit: int,
    config_path: Path | None,
    home: str | None,
) -> None:
    """The newest requests first, with their model, status, tokens and cost."""
    now = time.time()
    filters = RequestFilters(
        model=model,
        status=status,
        since=None if since is None else parse_when(since, now),
        until=None if until is None else parse_when(until, now),
    )

    async def work(store: Store) -> list[RequestRecord]:
        if account is None:
            return await newest_requests(store, filters, limit)
        found = await store.get_account(account)
        if found is None:
            raise NotFoundError(f"No account named '{account}'.")
        return await newest_requests(
            store, msgspec.structs.replace(filters, account_id=found.id), limit
        )

    records = run_on_store(config_path, home, work)
    if as_json:
        click.echo(msgspec.json.format(msgspec.json.encode(records), indent=2).decode())
    elif not records:
        click.echo("no requests logged (with these filters)")
    else:
        print_table(_table(records))
