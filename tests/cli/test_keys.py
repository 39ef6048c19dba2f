"""``sluice keys create|update|list`` set a key's policy in the gateway's own database;
the running gateway enforces it on the key's next request. ``sluice keys revoke`` takes
a key id, a whole key (``-``: from stdin) or a prefix, and says what it revoked."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

from click.testing import CliRunner, Result

from sluice.cli.main import main
from tests.support.gateway import running_gateway
from tests.support.raw_http import exchange, get, post

BODY = json.dumps({"model": "other/model", "messages": [{"role": "user", "content": "x"}]})


async def cli(*args: str) -> Result:
    """The CLI in a thread: it runs its own event loop."""
    return await asyncio.to_thread(CliRunner().invoke, main, list(args))


async def test_create_update_and_list_a_keys_policy(tmp_path: Path) -> None:
    home = str(tmp_path / "home")
    async with running_gateway(Path(home)) as gw:
        made = await cli("accounts", "create", "team", "--credits", "1", "--home", home)
        assert made.exit_code == 0, made.output
        created = await cli(
            "keys", "create", "--account", "team", "--models", "demo/*", "--rpm", "5",
            "--label", "ci", "--meta", "team=search", "--home", home,
        )  # fmt: skip
        assert created.exit_code == 0, created.output
        key = created.output.strip().splitlines()[-1]
        refused = await exchange(gw.host, gw.port, post("/v1/chat/completions", BODY.encode(), key))
        updated = await cli(
            "keys", "update", key[:16], "--models", "none", "--expires", "2099-01-01T00:00:00Z",
            "--home", home,
        )  # fmt: skip
        listed = await cli("keys", "list", "--account", "team", "--home", home)
        bad = await cli("keys", "update", key[:16], "--rpm", "0", "--home", home)
        budgeted = await cli(
            "keys", "update", key[:16], "--budget", "2.5", "--budget-period", "monthly",
            "--home", home,
        )  # fmt: skip
        rotated = await cli("keys", "rotate", key[:16], "--home", home)
        new = rotated.output.strip().splitlines()[-1]
        served = await exchange(gw.host, gw.port, get("/v1/models", new))
        after = await cli("keys", "list", "--account", "team", "--home", home)
    assert refused.status == 403 and refused.json()["error"]["code"] == "model_not_allowed"
    assert updated.exit_code == 0, updated.output
    doc = json.loads(updated.output)
    assert (doc["models"], doc["rpm"], doc["expires_at"], doc["name"], doc["metadata"]) == (
        None,
        5,
        "2099-01-01T00:00:00Z",
        "ci",
        {"team": "search"},
    )
    assert key not in listed.output
    assert "rpm=5" in listed.output and "expires=2099-01-01T00:00:00Z" in listed.output
    assert bad.exit_code == 2 and "at least 1" in bad.output
    assert budgeted.exit_code == 0, budgeted.output
    assert (
        json.loads(budgeted.output)["budget"],
        json.loads(budgeted.output)["budget_period"],
    ) == (
        2.5,
        "monthly",
    )
    assert rotated.exit_code == 0 and new.startswith("sk-sluice-") and new != key
    assert served.status == 200
    assert new[:14] in after.output and key[:14] not in after.output


def test_list_json_gives_each_key_without_its_secret(tmp_path: Path) -> None:
    home = ["--home", str(tmp_path)]
    runner = CliRunner()
    assert runner.invoke(main, ["init", *home]).exit_code == 0
    assert runner.invoke(main, ["accounts", "create", "team", *home]).exit_code == 0
    made = runner.invoke(main, ["keys", "create", "--account", "team", "--rpm", "3", *home])
    key = made.output.strip().splitlines()[-1]
    listed = runner.invoke(main, ["keys", "list", "--account", "team", "--json", *home])
    docs = json.loads(listed.output)
    assert [(d["prefix"], d["rpm"], d["revoked"]) for d in docs] == [(key[:18], 3, False)]
    assert docs[0]["id"].startswith("key_") and key not in listed.output


def test_the_command_line_stores_nothing_the_admin_api_would_refuse(tmp_path: Path) -> None:
    """Found by an adversarial pass: a tpm past 1e9 was stored and every request of the
    key then failed with a 500; labels with escape codes and empty globs went in too."""
    home = ["--home", str(tmp_path)]
    runner = CliRunner()
    assert runner.invoke(main, ["init", *home]).exit_code == 0
    assert runner.invoke(main, ["accounts", "create", "team", *home]).exit_code == 0
    for bad in (
        ["--tpm", "99999999999999999999"],
        ["--label", "x\x1b[31mred"],
        ["--meta", "k=" + "v" * 200],
        ["--models", "x" * 600],
    ):
        refused = runner.invoke(main, ["keys", "create", "--account", "team", *bad, *home])
        assert refused.exit_code == 2, (bad, refused.output)
    assert (
        runner.invoke(main, ["accounts", "update", "team", "--rpm", "2000000000", *home]).exit_code
        == 2
    )
    for command in (["update", "sk-s", "--rpm", "5"], ["rotate", "sk-sluice-a"], ["revoke", "sk-"]):
        short = runner.invoke(main, ["keys", *command, *home])
        assert short.exit_code == 2 and "4 more characters" in short.output, short.output
    made = runner.invoke(main, ["keys", "create", "--account", "team", "--models", "", *home])
    assert made.exit_code == 0, made.output
    listed = json.loads(
        runner.invoke(main, ["keys", "list", "--account", "team", "--json", *home]).output
    )
    assert [k["models"] for k in listed] == [[]]  # "" allows none, as [] does over HTTP


def _made_keys(home: list[str], count: int) -> list[tuple[str, str]]:
    """``count`` keys of a new account ``team``: each (key, id)."""
    runner = CliRunner()
    assert runner.invoke(main, ["init", *home]).exit_code == 0
    assert runner.invoke(main, ["accounts", "create", "team", *home]).exit_code == 0
    made = [
        runner.invoke(main, ["keys", "create", "--account", "team", *home]) for _ in range(count)
    ]
    keys = [m.output.strip().splitlines()[-1] for m in made]
    listed = json.loads(
        runner.invoke(main, ["keys", "list", "--account", "team", "--json", *home]).output
    )
    ids = {d["prefix"]: d["id"] for d in listed}
    return [(key, ids[key[:18]]) for key in keys]


async def test_revoke_takes_a_whole_key_from_stdin_and_the_key_stops(tmp_path: Path) -> None:
    """Found by an outside pass (issue 20): a leaked key pasted whole was "no live key
    starts with …" and kept working. (The key is not used before: a gateway that saw it
    keeps it cached for up to 5 s after the CLI revokes it, docs/admin.md.)"""
    home = tmp_path / "home"
    async with running_gateway(home) as gw:
        [(key, key_id)] = await asyncio.to_thread(_made_keys, ["--home", str(home)], 1)
        revoked = await asyncio.to_thread(
            CliRunner().invoke, main, ["keys", "revoke", "-", "--home", str(home)], key + "\n"
        )
        after = await exchange(gw.host, gw.port, get("/v1/models", key))
    assert revoked.exit_code == 0, revoked.output
    assert revoked.output == f"revoked {key_id}  {key[:18]}…  -\n"
    assert after.status == 401


def test_revoke_takes_an_id_a_whole_key_or_a_prefix_and_says_what_it_revoked(
    tmp_path: Path,
) -> None:
    home = ["--home", str(tmp_path)]
    runner = CliRunner()
    made = _made_keys(home, 3)
    answers = [
        runner.invoke(main, ["keys", "revoke", named, *home])
        for named in (made[0][1], made[1][0], made[2][0][:18])
    ]
    listed = json.loads(
        runner.invoke(main, ["keys", "list", "--account", "team", "--json", *home]).output
    )
    for (key, key_id), answer in zip(made, answers, strict=True):
        assert answer.exit_code == 0, answer.output
        assert answer.output.startswith(f"revoked {key_id}  {key[:18]}…")
        assert key not in answer.output
    assert [d["revoked"] for d in listed] == [True, True, True]


def test_revoking_what_names_no_live_key_exits_1_saying_so(tmp_path: Path) -> None:
    home = ["--home", str(tmp_path)]
    runner = CliRunner()
    [(key, key_id)] = _made_keys(home, 1)
    assert runner.invoke(main, ["keys", "revoke", key_id, *home]).exit_code == 0
    never = "sk-sluice-" + "Q" * 40
    for named, says in (
        (key_id, f"no live key has the id '{key_id}'"),
        (key, f"no live key is '{key[:18]}…'"),
        (never, "no live key is 'sk-sluice-QQQQQQQQ…'"),
        ("sk-sluice-QQQQ", "no live key starts with 'sk-sluice-QQQQ'"),
        (never[:30], "only those are kept readable"),
        ("key_nosuchkey", "no live key has the id 'key_nosuchkey'"),
    ):
        answer = runner.invoke(main, ["keys", "revoke", named, *home])
        assert answer.exit_code == 1, (named, answer.output)
        assert says in answer.output and "Traceback" not in answer.output, answer.output
        assert (
            key not in answer.output
            and never not in answer.output
            and never[:30] not in answer.output
        )
    for bad in ("key_", "acct_x", "sk-sluice-abc", "-"):
        refused = runner.invoke(main, ["keys", "revoke", bad, *home], input="not a key\n")
        assert refused.exit_code == 2 and "4 more characters" in refused.output, refused.output


def test_a_prefix_copied_from_keys_list_is_taken_as_listed(tmp_path: Path) -> None:
    """``keys list`` prints ``sk-sluice-AbCdEfGh…``; rotate, update and revoke refused
    that text until they took its trailing ellipsis as the listing's."""
    home = ["--home", str(tmp_path)]
    runner = CliRunner()
    (first, _), (second, _), (third, _) = _made_keys(home, 3)
    plain = runner.invoke(main, ["keys", "list", "--account", "team", *home]).output
    shown = {key: next(w for w in plain.split() if w.startswith(key[:18])) for key in
             (first, second, third)}  # fmt: skip
    assert all(text.endswith("…") for text in shown.values()), plain
    rotated = runner.invoke(main, ["keys", "rotate", shown[first], *home])
    updated = runner.invoke(main, ["keys", "update", shown[second], "--rpm", "7", *home])
    revoked = runner.invoke(main, ["keys", "revoke", shown[third], *home])
    assert rotated.exit_code == 0, rotated.output
    assert updated.exit_code == 0 and json.loads(updated.output)["rpm"] == 7, updated.output
    assert revoked.exit_code == 0 and revoked.output.startswith("revoked "), revoked.output


async def test_a_keys_cache_permissions_from_the_command_line(tmp_path: Path) -> None:
    home = str(tmp_path / "home")
    async with running_gateway(Path(home)):
        await cli("accounts", "create", "team", "--credits", "1", "--home", home)
        created = await cli(
            "keys", "create", "--account", "team", "--no-cache-fill", "--home", home
        )
        key = created.output.strip().splitlines()[-1]
        updated = await cli(
            "keys", "update", key[:16], "--no-cache-read", "--cache-fill", "--home", home
        )
        listed = await cli("keys", "list", "--account", "team", "--home", home)
    doc = json.loads(updated.output)
    assert (doc["cache_read"], doc["cache_fill"]) == (False, True)
    assert "cache_read=no" in listed.output and "cache_fill=no" not in listed.output
