"""``sluice accounts create|update|show|list`` with an account's own budget and limits,
read back by the store the gateway uses (its keys' principal carries them)."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

from click.testing import CliRunner, Result

from sluice.cli.main import main
from sluice.core.principal import AccountPolicy
from sluice.storage.factory import open_store

USD = 10**9


def run(home: Path, *args: str) -> Result:
    return CliRunner().invoke(main, [*args, "--home", str(home)])


async def stored_policy(home: Path, name: str) -> AccountPolicy:
    store = await open_store(f"sqlite:///{home / 'sluice.db'}")
    try:
        account = await store.get_account(name)
    finally:
        await store.close()
    assert account is not None
    return account.policy


def test_create_update_and_clear_an_accounts_policy(tmp_path: Path) -> None:
    assert run(tmp_path, "init").exit_code == 0
    made = run(tmp_path, "accounts", "create", "team", "--budget", "25", "--rpm", "60")
    assert made.exit_code == 0, made.output
    assert "budget:      $25.00 (never)" in made.output and "rpm:         60" in made.output
    updated = run(
        tmp_path, "accounts", "update", "team", "--budget-period", "monthly", "--tpm", "5000",
        "--meta", "owner=search", "--rpm", "none",
    )  # fmt: skip
    assert updated.exit_code == 0, updated.output
    assert asyncio.run(stored_policy(tmp_path, "team")) == AccountPolicy(
        tpm=5000, budget=25 * USD, budget_period="monthly", metadata={"owner": "search"}
    )
    shown = run(tmp_path, "accounts", "show", "team").output
    assert "budget:      $25.00 (monthly)" in shown and "tpm:         5000" in shown
    listed = json.loads(run(tmp_path, "accounts", "list", "--json").output)
    assert [(a["budget"], a["tpm"], a["metadata"], a["spent"]) for a in listed] == [
        (25.0, 5000, {"owner": "search"}, 0.0)  # spent: as the admin API's listing has it
    ]
    assert "$0.00 of $25.00" in run(tmp_path, "accounts", "list").output


def test_bad_values_and_unknown_accounts_are_refused(tmp_path: Path) -> None:
    assert run(tmp_path, "init").exit_code == 0
    assert run(tmp_path, "accounts", "create", "team").exit_code == 0
    assert run(tmp_path, "accounts", "update", "team", "--rpm", "0").exit_code == 2
    assert run(tmp_path, "accounts", "update", "team", "--budget", "-3").exit_code == 2
    for name in ("a/b", "_team", "t" * 65, "caf\u00e9"):  # the admin API's rule: a URL segment
        refused = run(tmp_path, "accounts", "create", name)
        assert refused.exit_code == 2 and "1-64 letters" in refused.output, (name, refused.output)
    missing = run(tmp_path, "accounts", "update", "nobody", "--rpm", "5")
    assert missing.exit_code == 1 and "no account named 'nobody'" in missing.output
    assert asyncio.run(stored_policy(tmp_path, "team")) == AccountPolicy()


def test_a_negative_credit_removes_credits_as_typed(tmp_path: Path) -> None:
    assert run(tmp_path, "init").exit_code == 0
    assert run(tmp_path, "accounts", "create", "team", "--credits", "5").exit_code == 0
    taken = run(tmp_path, "accounts", "credit", "team", "-2")  # not read as an option
    assert taken.exit_code == 0, taken.output
    assert "balance:     $3.00\n" in run(tmp_path, "accounts", "show", "team").output


def test_money_prints_as_money_below_zero_and_to_the_nano_dollar(tmp_path: Path) -> None:
    """An operator's debit may take an account below zero (docs/admin.md); it was
    printed ``$-15.000000000``."""
    assert run(tmp_path, "init").exit_code == 0
    assert run(tmp_path, "accounts", "create", "team", "--credits", "5").exit_code == 0
    assert run(tmp_path, "accounts", "credit", "team", "-20.000000001").exit_code == 0
    shown = run(tmp_path, "accounts", "show", "team").output
    assert "balance:     -$15.000000001\n" in shown and "available:   -$15.000000001\n" in shown


def test_negative_starting_credits_are_refused_as_the_admin_api_refuses_them(
    tmp_path: Path,
) -> None:
    assert run(tmp_path, "init").exit_code == 0
    for credits in (["--credits", "-5"], ["--credits=-5"], ["--credits", "-0.000000001"]):
        refused = run(tmp_path, "accounts", "create", "team", *credits)
        assert refused.exit_code == 2, (credits, refused.output)
        assert "Invalid value for '--credits': starting credits cannot be negative" in (
            refused.output
        )
        assert "Traceback" not in refused.output
    assert "no accounts yet" in run(tmp_path, "accounts", "list").output  # nothing created
    assert run(tmp_path, "accounts", "create", "team", "--credits", "-0").exit_code == 0
