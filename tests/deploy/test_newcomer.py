"""A newcomer's path through the README, run as the README writes it (issue 24).

The commands and the config are read from README.md, so the two cannot drift apart:

1. *Quickstart*: its first shell block but the last line (``sluice serve``) makes a
   venv and installs ``'sluice-gateway[server]'``: the built wheel, by that name.
2. *Your first provider*: its TOML block is saved under the name its ``sluice serve
   --config`` command gives, the README's local server (``127.0.0.1:11434``) replaced
   by a fake OpenAI-style upstream on 127.0.0.1; that command starts the gateway.
3. *Keys and budgets*: every shell block of it, in one bash, against that gateway (in
   place of ``127.0.0.1:8787``): an account, a key with a budget, a streamed request
   with the key, the spend.

What the key was charged, in the stream's usage, the spend report, the account's
balance and the key's own record, is the README's price of the tokens the fake reported.
And every config file the README shows starts a gateway.
"""

from __future__ import annotations

import asyncio
import json
import math
import re
import subprocess
import sys
import tomllib
from collections.abc import Iterator
from contextlib import contextmanager
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest

from sluice.config import parse_config
from sluice.core.money import nano_from_usd_text, usd_text
from sluice.server.lifecycle import start_gateway, stop_gateway
from sluice.settings import build_settings
from tests.deploy.conftest import ROOT, clean_env, serving, wheel
from tests.support.fake_openai import text_stream
from tests.support.fake_upstream import FakeUpstream, Reply

FENCE = re.compile(r"^```(\w+)\n(.*?)^```\n", re.MULTILINE | re.DOTALL)
README_GATEWAY = "127.0.0.1:8787"
README_SERVER = "127.0.0.1:11434"
REQUIREMENT = "'sluice-gateway[server]'"
USAGE = {"prompt_tokens": 12, "completion_tokens": 5, "total_tokens": 17}
OURS = ("OPENAI_", "ANTHROPIC_", "GEMINI_", "DEEPSEEK_", "AWS_", "SLUICE_")
"""Variables of this shell a newcomer's would not have: provider keys, Sluice's own."""


def readme() -> str:
    return (ROOT / "README.md").read_text()


def section(title: str) -> str:
    """The README's text under ``## title``, up to the next ``## `` heading."""
    text = readme()
    assert f"\n## {title}\n" in text, f"README.md has no section '## {title}'"
    return text.split(f"\n## {title}\n", 1)[1].split("\n## ", 1)[0]


def blocks(text: str, language: str) -> list[str]:
    return [found[2] for found in FENCE.finditer(text) if found[1] == language]


def newcomer_env(bin_dir: Path | None = None) -> dict[str, str]:
    """A shell whose ``python3`` is this Python, with ``bin_dir`` before it on PATH (as
    after ``activate``)."""
    env = {k: v for k, v in clean_env().items() if not k.startswith(OURS)}
    path = [str(bin_dir)] if bin_dir is not None else []
    env["PATH"] = ":".join([*path, str(Path(sys.executable).parent), env["PATH"]])
    return env


def bash(script: str, cwd: Path, env: dict[str, str]) -> str:
    """Run ``script`` as the README's reader would; what it printed on stdout."""
    done = subprocess.run(
        ["bash", "-euo", "pipefail", "-c", script],
        cwd=cwd, env=env, capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert done.returncode == 0, f"{script}\n{done.stdout}\n{done.stderr}"
    return done.stdout


def price_nano(price: dict[str, float], usage: dict[str, int]) -> int:
    """What ``usage`` costs at ``price`` (USD per million tokens), in nano-dollars."""
    usd = (
        Decimal(str(price["input"])) * usage["prompt_tokens"]
        + Decimal(str(price["output"])) * usage["completion_tokens"]
    ) / 10**6
    return math.ceil(usd * 10**9)


def install(workdir: Path, dist: Path) -> Path:
    """*Quickstart*'s install, its requirement met by the built wheel: the venv's bin."""
    [script, *_] = blocks(section("Quickstart"), "sh")
    *lines, serve = script.strip().splitlines()
    venv = re.search(r"-m venv (\S+)", script)
    assert venv is not None and serve == "sluice serve" and REQUIREMENT in script, script
    direct = f"'sluice-gateway[server] @ {wheel(dist).as_uri()}'"
    bash("\n".join(lines).replace(REQUIREMENT, direct), workdir, newcomer_env())
    return workdir / venv[1] / "bin"


@contextmanager
def first_provider(workdir: Path, env: dict[str, str], upstream: str) -> Iterator[str]:
    """*Your first provider*'s config and ``sluice serve``, its local server replaced by
    ``upstream``: the gateway's address while it runs."""
    text = section("Your first provider")
    [config], [command] = blocks(text, "toml"), blocks(text, "sh")
    found = re.fullmatch(r"sluice serve --config (\S+)\n", command)
    assert found is not None and README_SERVER in config, command + config
    (workdir / found[1]).write_text(config.replace(README_SERVER, upstream))
    argv: list[str | Path] = ["bash", "-c", f"exec {command.strip()} --port 0"]
    with serving(argv, workdir, env) as url:
        yield url.removeprefix("http://")


def sse_data(output: str) -> list[Any]:
    """The JSON of every ``data:`` line in ``output`` but ``[DONE]``."""
    return [json.loads(line[6:]) for line in output.splitlines() if line.startswith("data: {")]


def spend_report(output: str) -> Any:
    """The one ``spend_report`` object at the start of a line of ``output``."""
    docs = [
        json.JSONDecoder().raw_decode(line)[0] for line in output.splitlines() if line[:1] == "{"
    ]
    [report] = [doc for doc in docs if doc.get("object") == "spend_report"]
    return report


async def test_the_readme_path_from_install_to_spend(
    dist: Path, tmp_path: Path, fake: FakeUpstream
) -> None:
    fake.default = Reply.stream(*text_stream("Hello", " world", usage=USAGE))
    [model] = tomllib.loads(blocks(section("Your first provider"), "toml")[0])["models"]
    cost = price_nano(model["price"], USAGE)
    script = "\n".join(blocks(section("Keys and budgets"), "sh"))
    account = re.search(r"sluice accounts create (\S+) --credits (\S+)", script)
    key = re.search(r"sluice keys create --account (\S+) --budget (\S+)\)", script)
    assert account is not None and key is not None and cost > 0, script

    env = newcomer_env(await asyncio.to_thread(install, tmp_path, dist))
    with first_provider(tmp_path, env, f"127.0.0.1:{fake.port}") as gateway:
        script = script.replace(README_GATEWAY, gateway)
        output = await asyncio.to_thread(bash, script, tmp_path, env)

    assert len(fake.requests) == 1 and output.count("data: [DONE]") == 1, output
    assert fake.requests[0].json()["model"] == next(iter(model["providers"].values()))
    *answer, last = sse_data(output)
    assert "".join(c["choices"][0]["delta"].get("content", "") for c in answer) == "Hello world"
    assert round(last["usage"]["cost"] * 10**9) == cost
    assert spend_report(output)["total"]["spend_nano"] == cost
    assert usd_text(nano_from_usd_text(account[2]) - cost) in output  # the balance shown
    listed = bash(f"sluice keys list --account {account[1]} --json", tmp_path, env)
    [record] = json.loads(listed)
    assert record["budget"] == float(key[2]) and round(record["spent"] * 10**9) == cost


CONFIGS = blocks(readme(), "toml")


@pytest.mark.parametrize("config", CONFIGS, ids=[f"toml-{n}" for n in range(len(CONFIGS))])
async def test_every_config_in_the_readme_starts_a_gateway(config: str, tmp_path: Path) -> None:
    file = parse_config(config)
    env = {c.api_key_env: "sk-readme" for c in file.connections if c.api_key_env}
    running = await start_gateway(build_settings(file, env, tmp_path, port=0))
    await stop_gateway(running, grace=0)
