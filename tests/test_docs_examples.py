"""Every code block the docs mark as an example runs, against a gateway the test starts.

A block is an example when the line before its fence is ``<!-- example -->``. Shell
blocks run in bash (``-euo pipefail``), Python blocks in this venv's Python, both in a
directory whose ``.sluice/`` is the gateway's home (so ``.sluice/dev-key`` is its key,
as after ``make serve``), with ``.venv/bin`` first on PATH and the gateway's address in
place of ``127.0.0.1:8787``. A block passes when it exits 0 and prints no traceback.
"""

from __future__ import annotations

import asyncio
import os
import re
import sys
from pathlib import Path

import msgspec
import pytest

from tests.support.gateway import running_gateway

ROOT = Path(__file__).parent.parent
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
MARK = "<!-- example -->"
FENCE = re.compile(r"^```(sh|python)\n(.*?)^```\n", re.MULTILINE | re.DOTALL)
DEFAULT_ADDRESS = "127.0.0.1:8787"
TIMEOUT = 60.0


class Example(msgspec.Struct, frozen=True):
    path: str
    line: int
    language: str
    code: str


def examples(text: str, path: str) -> list[Example]:
    """The marked blocks of one document, with the line their fence opens on."""
    found = []
    for match in FENCE.finditer(text):
        before = text[: match.start()].rstrip("\n").rsplit("\n", 1)[-1]
        if before.strip() == MARK:
            line = text.count("\n", 0, match.start()) + 1
            found.append(Example(path, line, match[1], match[2]))
    return found


ALL = [e for doc in DOCS for e in examples(doc.read_text(), str(doc.relative_to(ROOT)))]


async def run_example(example: Example, workdir: Path, address: str) -> tuple[int, str]:
    """Run one example; its exit status and what it printed (stdout, then stderr)."""
    code = example.code.replace(DEFAULT_ADDRESS, address)
    argv = ["bash", "-euo", "pipefail", "-c", code]
    if example.language == "python":
        argv = [sys.executable, "-c", code]
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}:{os.environ['PATH']}"}
    env["SLUICE_HOME"] = str(workdir / ".sluice")
    proc = await asyncio.create_subprocess_exec(
        *argv,
        cwd=workdir,
        env=env,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    try:
        out, err = await asyncio.wait_for(proc.communicate(), TIMEOUT)
    except TimeoutError:
        proc.kill()
        await proc.communicate()
        return -1, f"timed out after {TIMEOUT} s"
    return proc.returncode or 0, out.decode(errors="replace") + err.decode(errors="replace")


def test_the_docs_mark_examples_in_every_kind() -> None:
    assert {e.language for e in ALL} == {"sh", "python"}
    assert {e.path for e in ALL} >= {"README.md", "docs/client.md", "docs/messages.md"}


@pytest.mark.parametrize("example", ALL, ids=[f"{e.path}:{e.line}" for e in ALL])
async def test_every_marked_example_runs(example: Example, tmp_path: Path) -> None:
    async with running_gateway(tmp_path / ".sluice") as gw:
        status, printed = await run_example(example, tmp_path, gw.base_url.removeprefix("http://"))
    assert status == 0 and "Traceback" not in printed, f"{example.path}:{example.line}\n{printed}"


async def test_a_broken_example_fails(tmp_path: Path) -> None:
    """The harness can fail: a block that uses a name it never defined, as docs/client.md's
    first example once did."""
    text = f"{MARK}\n```python\nprint(api_key)\n```\n"
    [broken] = examples(text, "broken.md")
    async with running_gateway(tmp_path / ".sluice") as gw:
        status, printed = await run_example(broken, tmp_path, gw.base_url.removeprefix("http://"))
    assert status != 0 and "NameError: name 'api_key' is not defined" in printed
