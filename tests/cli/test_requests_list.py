"""``sluice requests list``: a table for people, ``--json`` for scripts, ``--since`` ages."""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path

import click
import msgspec
import pytest
from click.testing import CliRunner, Result

from sluice.cli.main import main
from sluice.cli.requests import newest_requests, parse_when
from sluice.storage.base import RequestFilters, RequestRecord
from sluice.storage.factory import open_store


def run(home: Path, *args: str) -> Result:
    return CliRunner().invoke(main, [*args, "--home", str(home)])


async def _log(home: Path, records: list[RequestRecord]) -> None:
    store = await open_store(f"sqlite:///{home / 'sluice.db'}")
    try:
        await store.write_requests(records)
    finally:
        await store.close()


def record(n: int, account: str, age: int) -> RequestRecord:
    """Dated ``age`` seconds before now: now, not when the module was imported (under
    xdist that can be many minutes before the test runs, and ``--since 25m`` then
    misses rows)."""
    return RequestRecord(
        id=f"req_{account[-4:]}{n:04d}",
        account_id=account,
        key_id="key_x",
        created_at=int(time.time()) - age,
        requested_model="test/big" if n % 2 else "test/small",
        provider="openai",
        status="error" if n % 3 == 0 else "complete",
        http_status=200,
        prompt_tokens=10,
        completion_tokens=n,
        cost=0.001 * n,
    )


@pytest.fixture
def home(tmp_path: Path) -> Path:
    assert run(tmp_path, "init").exit_code == 0
    for name in ("team", "labs"):
        assert run(tmp_path, "accounts", "create", name).exit_code == 0
    ids = {
        d["name"]: d["id"] for d in json.loads(run(tmp_path, "accounts", "list", "--json").output)
    }
    rows = [record(n, ids["team"], age=n * 600) for n in range(10)]  # one every 10 minutes
    rows += [record(n, ids["labs"], age=n * 600 + 1) for n in range(5)]
    asyncio.run(_log(tmp_path, rows))
    return tmp_path


def test_json_lists_the_newest_first_with_every_filter(home: Path) -> None:
    everything = json.loads(run(home, "requests", "list", "--json").output)
    assert len(everything) == 15
    assert [d["created_at"] for d in everything] == sorted(
        (d["created_at"] for d in everything), reverse=True
    )
    cases = {
        ("--account", "team"): 10,
        ("--account", "team", "--status", "error"): 4,  # n = 0, 3, 6, 9
        ("--model", "test/big"): 7,  # odd n: 5 of team, 2 of labs
        ("--since", "25m"): 6,  # team n 0-2, labs n 0-2
        ("--until", "25m"): 9,
        ("--limit", "3"): 3,
    }
    for args, count in cases.items():
        result = run(home, "requests", "list", "--json", *args)
        assert result.exit_code == 0, result.output
        assert len(json.loads(result.output)) == count, args


def test_an_unknown_account_is_an_error(home: Path) -> None:
    result = run(home, "requests", "list", "--account", "nobody")
    assert result.exit_code == 1 and "No account named 'nobody'" in result.output


def test_the_table_shows_one_line_per_request(home: Path) -> None:
    result = run(home, "requests", "list", "--account", "team", "--limit", "4")
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    header = next(line for line in lines if "provider" in line)
    for column in ("time (UTC)", "id", "model", "status", "tokens in/out", "cost"):
        assert column in header
    rows = [line for line in lines if "req_" in line]
    assert len(rows) == 4 and "error" in rows[0] and "$0.001 " in rows[1]


def test_no_rows_says_so(home: Path) -> None:
    result = run(home, "requests", "list", "--status", "blocked")
    assert result.exit_code == 0 and "no requests logged" in result.output
    unknown = run(home, "requests", "list", "--status", "ok")  # not a status a row has
    assert unknown.exit_code == 2 and "complete" in unknown.output


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("90s", 1_000_000 - 90),
        ("30m", 1_000_000 - 1800),
        ("1h", 1_000_000 - 3600),
        ("2d", 1_000_000 - 172_800),
        ("1w", 1_000_000 - 604_800),
        ("2026-01-02T03:04:05", 1767323045),
        ("2026-01-02T03:04:05+01:00", 1767319445),
        ("2026-01-02", 1767312000),
    ],
)
def test_since_takes_ages_and_iso_times(text: str, expected: int) -> None:
    assert parse_when(text, 1_000_000.5) == expected


@pytest.mark.parametrize("text", ["1y", "h", "-1h", "yesterday", ""])
def test_anything_else_is_a_bad_parameter(text: str) -> None:
    with pytest.raises(click.BadParameter):
        parse_when(text, 0)


async def test_reading_in_pages_stops_at_the_limit(tmp_path: Path) -> None:
    store = await open_store(f"sqlite:///{tmp_path / 'db.sqlite'}")
    try:
        await store.write_requests([record(n, "acct_x", n) for n in range(23)])
        got = await newest_requests(store, RequestFilters(), 20, page=6)
        every = await newest_requests(store, RequestFilters(), 100, page=5)
    finally:
        await store.close()
    assert [r.id for r in got] == [f"req_ct_x{n:04d}" for n in range(20)]
    assert len(every) == 23


def test_the_table_names_accounts_and_keys_and_fits_the_width_it_is_given(
    home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """It showed ``acct_…``/``key_…`` ids and stayed 194 columns wide whatever the
    terminal; a key is shown by its label, else by its prefix as ``keys list`` has it."""
    made = run(home, "keys", "create", "--account", "team", "--label", "ci")
    plain = run(home, "keys", "create", "--account", "labs")
    assert made.exit_code == plain.exit_code == 0
    keys = {d["name"] or d["prefix"]: d["id"] for name in ("team", "labs") for d in
            json.loads(run(home, "keys", "list", "--account", name, "--json").output)}  # fmt: skip
    ids = {d["name"]: d["id"] for d in json.loads(run(home, "accounts", "list", "--json").output)}
    [prefix] = [k for k in keys if k != "ci"]
    mine = msgspec.structs.replace(record(50, ids["team"], age=0), key_id=keys["ci"])
    theirs = msgspec.structs.replace(record(51, ids["labs"], age=0), key_id=keys[prefix])
    asyncio.run(_log(home, [mine, theirs]))
    monkeypatch.setenv("COLUMNS", "100")
    result = run(home, "requests", "list", "--limit", "5")
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    assert max(len(line) for line in lines) <= 100, result.output
    team = next(line for line in lines if mine.id in line)
    labs = next(line for line in lines if theirs.id in line)
    assert " team " in team and " ci " in team and ids["team"] not in result.output
    assert " labs " in labs and f"{prefix}…" in labs and keys[prefix] not in result.output
    header = next(line for line in lines if "status" in line)
    assert "ms" not in header.split() and "http" not in header.split()  # left out to fit
    monkeypatch.setenv("COLUMNS", "60")
    narrow = run(home, "requests", "list", "--limit", "5").output
    assert max(len(line) for line in narrow.splitlines()) <= 60, narrow
    assert mine.id in narrow and theirs.id in narrow  # the ids stay whole
    monkeypatch.delenv("COLUMNS")
    piped = run(home, "requests", "list", "--limit", "5").output
    header = next(line for line in piped.splitlines() if "status" in line)
    assert all(column in header for column in ("provider", "http", "tokens in/out", "ms"))
