"""``sluice spend``: the ledger's charges summed for people (a table with its total) and
for scripts (``--json``, the admin API's shape), filtered by account and time."""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from sluice.cli.main import main
from sluice.cli.spend import every_group
from sluice.storage.base import HoldRequest, Settlement
from sluice.storage.factory import open_store
from sluice.storage.spend import SpendFilters

NOW = int(time.time())
USD = 10**9
CHARGES = [  # (account, model, nano-USD, age in seconds)
    ("team", "test/big", 1_500_000, 10),
    ("team", "test/big", 2_500_001, 3 * 86400),
    ("team", "test/small", 7, 20),
    ("labs", "test/small", 40, 30),
]


def run(home: Path, *args: str) -> Result:
    return CliRunner().invoke(main, [*args, "--home", str(home)])


async def _charge(home: Path, ids: dict[str, str]) -> None:
    store = await open_store(f"sqlite:///{home / 'sluice.db'}")
    try:
        for n, (name, model, amount, age) in enumerate(CHARGES):
            when = NOW - age
            hold = HoldRequest(f"h{n}", ids[name], f"key_{name}", f"r{n}", amount, when, when + 9)
            assert await store.place_hold(hold)
            await store.settle(
                [Settlement(f"h{n}", ids[name], f"key_{name}", f"r{n}", amount, when, model, "p")]
            )
    finally:
        await store.close()


@pytest.fixture
def home(tmp_path: Path) -> Path:
    assert run(tmp_path, "init").exit_code == 0
    for name in ("team", "labs"):
        assert run(tmp_path, "accounts", "create", name, "--credits", "1").exit_code == 0
    listed = json.loads(run(tmp_path, "accounts", "list", "--json").output)
    asyncio.run(_charge(tmp_path, {d["name"]: d["id"] for d in listed}))
    return tmp_path


def test_json_sums_by_model_with_the_whole_total(home: Path) -> None:
    doc = json.loads(run(home, "spend", "--by", "model", "--json").output)
    assert [(g["model"], g["requests"], g["spend_nano"]) for g in doc["data"]] == [
        ("test/big", 2, 4_000_001),
        ("test/small", 2, 47),
    ]
    assert doc["total"]["spend_nano"] == 4_000_048 and doc["object"] == "spend_report"


def test_since_and_account_narrow_the_report(home: Path) -> None:
    doc = json.loads(
        run(home, "spend", "--by", "model", "--since", "1d", "--account", "team", "--json").output
    )
    assert [(g["model"], g["spend_nano"]) for g in doc["data"]] == [
        ("test/big", 1_500_000),
        ("test/small", 7),
    ]
    assert doc["since"] == pytest.approx(time.time() - 86400, abs=5)


def test_the_table_shows_each_group_and_the_total(home: Path) -> None:
    """Money as money, to the nano-dollar: six decimals printed labs' 40 nano-dollars
    as 0.000000 and hid team's last 8 (issue 24)."""
    result = run(home, "spend", "--by", "key")
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    assert any("key_team" in line and "$0.004000008" in line for line in lines)
    assert any("key_labs" in line and "$0.00000004" in line for line in lines)
    assert any("total" in line and "4" in line and "$0.004000048" in line for line in lines)


def test_no_charges_says_so_and_an_unknown_account_fails(home: Path) -> None:
    assert "nothing charged" in run(home, "spend", "--by", "day", "--since", "1s").output
    assert run(home, "spend", "--by", "day", "--account", "nobody").exit_code != 0
    assert run(home, "spend", "--by", "team").exit_code == 2  # not a grouping


def test_without_a_database_it_exits_2(tmp_path: Path) -> None:
    result = run(tmp_path / "empty", "spend", "--by", "model")
    assert result.exit_code == 2 and "sluice init" in result.output


async def test_reading_in_pages_gets_every_group(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = await open_store(f"sqlite:///{tmp_path / 'p.db'}")
    try:
        await store.create_account("a", "a", metered=True, credits=USD, now=1)
        for n in range(7):
            assert await store.place_hold(HoldRequest(f"h{n}", "a", f"k{n}", f"r{n}", 9, 10, 99))
        await store.settle([Settlement(f"h{n}", "a", f"k{n}", f"r{n}", n, 10) for n in range(7)])
        monkeypatch.setattr("sluice.cli.spend.PAGE", 3)
        groups, total = await every_group(store, SpendFilters(), "key")
    finally:
        await store.close()
    assert [g.value for g in groups] == [f"k{n}" for n in range(7)] and total.spend == 21
