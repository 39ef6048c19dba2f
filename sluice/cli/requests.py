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
from sluice.cli.output import print_fitting
from sluice.cli.state import run_on_store
from sluice.core.money import NANO_PER_USD, usd_text
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


async def owner_names(store: Store, records: list[RequestRecord]) -> dict[str, str]:
    """The accounts' and keys' ids in ``records`` to what people call them: an account's
    name, a key's label (else its prefix, as ``keys list`` prints it)."""
    accounts = {r.account_id for r in records}
    names: dict[str, str] = {}
    after = None
    while len(names) < len(accounts) and (page := await store.list_accounts(PAGE, after)):
        names.update((a.id, a.name) for a in page if a.id in accounts)
        after = page[-1].id
    for account_id in accounts:
        names.update((k.id, k.name or f"{k.prefix}…") for k in await store.list_keys(account_id))
    return names


COLUMNS = ("time (UTC)", "id", "account", "key", "model", "provider", "status", "http",
           "tokens in/out", "cost", "ms")  # fmt: skip
NARROWER = ("ms", "http", "provider", "tokens in/out", "key", "account")
"""Columns left out, one more at a time, until the table fits the terminal."""


def _cells(r: RequestRecord, names: dict[str, str]) -> dict[str, str]:
    model = r.requested_model or ""
    if r.served_model and r.served_model != model:
        model = f"{model} -> {r.served_model}"
    return {
        "time (UTC)": time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(r.created_at)),
        "id": r.id,
        "account": names.get(r.account_id, r.account_id),
        "key": names.get(r.key_id or "", r.key_id or ""),
        "model": model,
        "provider": r.provider or "",
        "status": r.status,
        "http": str(r.http_status),
        "tokens in/out": f"{r.prompt_tokens}/{r.completion_tokens}",
        "cost": "" if r.cost is None else usd_text(round(r.cost * NANO_PER_USD)),
        "ms": f"{r.duration_ms:.0f}",
    }


def _tables(records: list[RequestRecord], names: dict[str, str]) -> list[Any]:
    """The table with every column, then with fewer and fewer (:data:`NARROWER`)."""
    from rich import box
    from rich.table import Table

    rows = [_cells(r, names) for r in records]
    tables = []
    for dropped in range(len(NARROWER) + 1):
        shown = [c for c in COLUMNS if c not in NARROWER[:dropped]]
        table = Table(box=box.SIMPLE_HEAD, collapse_padding=True, pad_edge=False)
        for name in shown:
            right = name in ("http", "cost", "ms")
            whole = name in ("time (UTC)", "id", "key")  # copied as they are
            table.add_column(name, justify="right" if right else "left", no_wrap=whole)
        for row in rows:
            table.add_row(*(row[c] for c in shown))
        tables.append(table)
    return tables


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

    async def work(store: Store) -> tuple[list[RequestRecord], dict[str, str]]:
        scoped = filters
        if account is not None:
            found = await store.get_account(account)
            if found is None:
                raise NotFoundError(f"No account named '{account}'.")
            scoped = msgspec.structs.replace(filters, account_id=found.id)
        records = await newest_requests(store, scoped, limit)
        return records, ({} if as_json else await owner_names(store, records))

    records, names = run_on_store(config_path, home, work)
    if as_json:
        click.echo(msgspec.json.format(msgspec.json.encode(records), indent=2).decode())
    elif not records:
        click.echo("no requests logged (with these filters)")
    else:
        print_fitting(_tables(records, names))
