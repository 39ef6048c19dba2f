"""The CLI finds the gateway's state as ``serve`` does and never creates a database:
only ``serve`` and ``init`` do; any other command that finds none exits 2 and says
where it looked."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from contextlib import nullcontext
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from sluice.cli.main import main
from sluice.storage.factory import open_store
from tests.support.databases import fresh_postgres
from tests.support.process import gateway_process
from tests.support.raw_http import exchange, get

DB_COMMANDS = [
    ["accounts", "create", "team2", "--credits", "1"],
    ["accounts", "credit", "team2", "1"],
    ["accounts", "show", "team2"],
    ["accounts", "list"],
    ["accounts", "list", "--json"],
    ["keys", "create", "--account", "team2"],
    ["keys", "list", "--account", "team2"],
    ["keys", "revoke", "sk-sluice-AbCd"],
    ["ledger", "reconcile"],
]
COMMAND_IDS = [" ".join(c[:2]) + (" --json" if "--json" in c else "") for c in DB_COMMANDS]


def run(*args: str, env: dict[str, str] | None = None) -> Result:
    return CliRunner().invoke(main, list(args), env=env)


@pytest.fixture
def empty_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The working directory: empty, with no SLUICE_HOME set."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("SLUICE_HOME", raising=False)
    return tmp_path


def assert_refused(result: Result, looked_at: Path, source: str) -> None:
    assert result.exit_code == 2, result.output
    assert f"no database at {looked_at}" in result.output
    assert source in result.output
    for hint in ("--home", "SLUICE_HOME", "--config", "sluice init"):
        assert hint in result.output
    assert "Traceback" not in result.output


@pytest.mark.parametrize("command", DB_COMMANDS, ids=COMMAND_IDS)
def test_every_command_refuses_an_empty_directory(empty_dir: Path, command: list[str]) -> None:
    result = run(*command)
    assert_refused(result, empty_dir / ".sluice" / "sluice.db", "the default home ./.sluice")
    assert list(empty_dir.iterdir()) == []  # nothing created, not even the directory


def test_a_sluice_home_pointing_nowhere_is_refused(empty_dir: Path) -> None:
    nowhere = empty_dir / "nowhere"
    result = run("accounts", "create", "team2", "--credits", "1", env={"SLUICE_HOME": str(nowhere)})
    assert_refused(result, nowhere / "sluice.db", f"SLUICE_HOME={nowhere}")
    assert not nowhere.exists()


def test_home_and_config_name_where_they_looked(empty_dir: Path) -> None:
    by_flag = run("accounts", "list", "--home", "elsewhere")
    assert_refused(by_flag, empty_dir / "elsewhere" / "sluice.db", "--home elsewhere")
    config = empty_dir / "sluice.toml"
    config.write_text(f'[storage]\nurl = "sqlite:///{empty_dir}/db/x.db"\n')
    by_config = run("ledger", "reconcile", "--config", str(config))
    assert_refused(by_config, empty_dir / "db" / "x.db", f"the [storage] url of {config}")
    assert sorted(p.name for p in empty_dir.iterdir()) == ["sluice.toml"]


def test_init_creates_the_database_then_commands_work(empty_dir: Path) -> None:
    made = run("init")
    assert made.exit_code == 0, made.output
    db = empty_dir / ".sluice" / "sluice.db"
    assert f"created the Sluice database at {db}" in made.output
    assert db.is_file() and (db.parent.stat().st_mode & 0o777) == 0o700
    again = run("init")
    assert again.exit_code == 0 and "exists; schema at version" in again.output
    created = run("accounts", "create", "team2", "--credits", "1")
    assert created.exit_code == 0, created.output
    key = run("keys", "create", "--account", "team2")
    assert key.exit_code == 0 and key.output.strip().startswith("sk-sluice-")
    listed = run("accounts", "list", "--json")
    assert [a["name"] for a in json.loads(listed.output)] == ["team2"]
    assert run("ledger", "reconcile").exit_code == 0


def test_commands_on_the_database_need_no_provider_key(empty_dir: Path) -> None:
    """An operator's shell need not hold the keys the gateway's connections name: the
    commands on the database read only the file's ``[storage]``."""
    config = empty_dir / "sluice.toml"
    config.write_text(
        f'[storage]\nurl = "sqlite:///{empty_dir}/x.db"\n'
        '[[connections]]\nid = "conn_o"\nprovider = "openai"\napi_key_env = "SLUICE_UNSET_KEY"\n'
    )
    asyncio.run(created_store(f"sqlite:///{empty_dir}/x.db"))
    made = run("accounts", "create", "team2", "--config", str(config))
    assert made.exit_code == 0, made.output
    assert run("ledger", "reconcile", "--config", str(config)).exit_code == 0


async def created_store(url: str) -> None:
    store = await open_store(url)
    await store.close()


def test_init_with_home_and_config(empty_dir: Path) -> None:
    home = empty_dir / "state"
    assert run("init", "--home", str(home)).exit_code == 0
    assert run("accounts", "create", "a", "--home", str(home)).exit_code == 0
    assert run("accounts", "show", "a", env={"SLUICE_HOME": str(home)}).exit_code == 0
    config = empty_dir / "sluice.toml"
    config.write_text(f'[storage]\nurl = "sqlite:///{empty_dir}/db/x.db"\n')
    assert run("init", "--config", str(config)).exit_code == 0
    assert (empty_dir / "db" / "x.db").is_file()
    assert run("accounts", "show", "a", "--config", str(config)).exit_code == 1  # another db


async def test_postgres_without_sluice_tables_is_refused_until_init(tmp_path: Path) -> None:
    async with fresh_postgres() as dsn:
        config = tmp_path / "sluice.toml"
        config.write_text(f'[storage]\nurl = "{dsn}"\n')
        refused = await cli("accounts", "list", "--config", str(config))
        made = await cli("init", "--config", str(config))
        works = await cli("accounts", "create", "team", "--config", str(config))
    assert refused.exit_code == 2, refused.output
    assert "holds no Sluice tables" in refused.output and "sluice init" in refused.output
    assert made.exit_code == 0 and "created the Sluice database" in made.output
    assert works.exit_code == 0, works.output


def test_an_unreachable_postgres_is_refused_without_its_password(empty_dir: Path) -> None:
    config = empty_dir / "sluice.toml"
    config.write_text('[storage]\nurl = "postgresql://app:hunter2-secret@127.0.0.1:1/sluice"\n')
    result = run("accounts", "list", "--config", str(config))
    assert result.exit_code == 2, result.output
    assert "no database at postgresql://app:***@127.0.0.1:1/sluice" in result.output
    assert "hunter2" not in result.output


async def cli(*args: str) -> Result:
    """The CLI in a thread: it runs its own event loop."""
    return await asyncio.to_thread(CliRunner().invoke, main, list(args))


def cli_process(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """The CLI as a user runs it, from ``cwd``, with no SLUICE_HOME: only its flags
    say where the state is."""
    env = {k: v for k, v in os.environ.items() if k != "SLUICE_HOME"}
    return subprocess.run(
        [sys.executable, "-m", "sluice", *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


@pytest.mark.parametrize("backend", ["sqlite", "postgres"])
async def test_the_cli_and_a_running_gateway_share_one_database(
    tmp_path: Path, backend: str
) -> None:
    """An account and key made by the CLI (``--home`` of the running gateway, or its
    ``--config`` for PostgreSQL) are the gateway's: it accepts the printed key."""
    home, elsewhere = tmp_path / "home", tmp_path / "elsewhere"
    elsewhere.mkdir()
    async with fresh_postgres() if backend == "postgres" else nullcontext("") as dsn:
        # on PostgreSQL the development key is off unless the file turns it on
        config = f'[storage]\nurl = "{dsn}"\n[server]\ndev_key = true\n' if dsn else ""
        async with gateway_process(home, config) as gw:
            where = ["--config", str(gw.config)] if dsn else ["--home", str(home)]
            made = await asyncio.to_thread(
                cli_process, elsewhere, "accounts", "create", "team2", "--credits", "1", *where
            )
            key = await asyncio.to_thread(
                cli_process, elsewhere, "keys", "create", "--account", "team2", *where
            )
            assert made.returncode == 0 and key.returncode == 0, made.stderr + key.stderr
            printed = key.stdout.strip().splitlines()[-1]
            accepted = await exchange(gw.host, gw.port, get("/v1/models", printed))
            listed = await asyncio.to_thread(
                cli_process, elsewhere, "accounts", "list", "--json", *where
            )
    assert accepted.status == 200, accepted.body
    assert sorted(a["name"] for a in json.loads(listed.stdout)) == ["dev", "team2"]
    assert list(elsewhere.iterdir()) == []  # the CLI made nothing where it ran
