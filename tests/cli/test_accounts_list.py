"""``sluice accounts list``: a table for people, ``--json`` for scripts."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from sluice.cli.accounts_list import all_accounts
from sluice.cli.main import main
from sluice.core.money import usd_text
from sluice.storage.factory import open_store


def run(home: Path, *args: str) -> Result:
    return CliRunner().invoke(main, [*args, "--home", str(home)])


@pytest.fixture
def home(tmp_path: Path) -> Path:
    assert run(tmp_path, "init").exit_code == 0
    for name, credits in (("team", "25"), ("research", "0.000012345"), ("free", "0")):
        made = run(tmp_path, "accounts", "create", name, "--credits", credits)
        assert made.exit_code == 0, made.output
    return tmp_path


def test_json_lists_every_account_with_exact_fields(home: Path) -> None:
    result = run(home, "accounts", "list", "--json")
    assert result.exit_code == 0, result.output
    docs = json.loads(result.output)
    assert sorted(d["name"] for d in docs) == ["free", "research", "team"]
    assert [d["id"] for d in docs] == sorted(d["id"] for d in docs)
    team = next(d for d in docs if d["name"] == "team")
    assert set(team) == {
        "id",
        "name",
        "metered",
        "is_dev",
        "balance",
        "held",
        "available",
        "open_holds",
        "rpm",
        "tpm",
        "budget",
        "budget_period",
        "metadata",
        "created_at",
    }
    assert (team["balance"], team["available"], team["held"], team["open_holds"]) == (25, 25, 0, 0)
    assert team["metered"] is True and team["is_dev"] is False
    assert (team["rpm"], team["budget"], team["budget_period"]) == (None, None, "never")
    assert isinstance(team["created_at"], int)


def test_the_table_shows_each_account_on_one_line(home: Path) -> None:
    result = run(home, "accounts", "list")
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    header = next(line for line in lines if "balance" in line)
    for column in ("name", "metered", "balance", "held", "available", "holds", "created (UTC)"):
        assert column in header
    team = next(line for line in lines if line.split()[:1] == ["team"])
    assert team.split()[1:5] == ["yes", "$25.00", "$0.00", "$25.00"]
    research = next(line for line in lines if line.split()[:1] == ["research"])
    assert "$0.000012345" in research  # exact, never rounded away


def test_an_empty_database_says_so_and_json_is_an_empty_array(tmp_path: Path) -> None:
    assert run(tmp_path, "init").exit_code == 0
    assert "no accounts yet" in run(tmp_path, "accounts", "list").output
    assert json.loads(run(tmp_path, "accounts", "list", "--json").output) == []


async def test_more_accounts_than_one_read_are_all_listed_once(tmp_path: Path) -> None:
    store = await open_store(f"sqlite:///{tmp_path / 'sluice.db'}")
    try:
        for n in range(5):
            await store.create_account(f"acct_{n}", f"a{n}", metered=True, credits=0, now=n)
        assert [a.id for a in await all_accounts(store, page=2)] == [f"acct_{n}" for n in range(5)]
        assert len(await all_accounts(store, page=5)) == 5  # a full last read, then an empty one
    finally:
        await store.close()


@pytest.mark.parametrize(
    ("nano", "text"),
    [
        (0, "$0.00"),
        (25 * 10**9, "$25.00"),
        (1_500_000_000, "$1.50"),
        (12_345, "$0.000012345"),
        (-2 * 10**9, "-$2.00"),
        (123_456_789_000_000, "$123456.789"),
    ],
    ids=["zero", "whole", "cents", "nano", "negative", "large"],
)
def test_usd_text(nano: int, text: str) -> None:
    assert usd_text(nano) == text
