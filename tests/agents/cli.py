"""An agent CLI from tests/node, run as its users run it (a subprocess, its own HOME)."""

from __future__ import annotations

import asyncio
import os
from collections.abc import Sequence
from pathlib import Path

import pytest

BIN = Path(__file__).parents[1] / "node" / "node_modules" / ".bin"


def installed(name: str) -> Path:
    """The CLI's path; absent, the test skips, or under ``CI=true`` fails."""
    path = BIN / name
    if path.exists():
        return path
    message = f"{name} is not installed in tests/node (make test installs it)"
    if os.environ.get("CI") == "true":
        pytest.fail(message + " — CI=true requires it")
    pytest.skip(message)


LIMIT = 120.0
"""Seconds a run may take before it is killed."""


async def run(
    name: str, args: Sequence[str], cwd: Path, env: dict[str, str]
) -> tuple[int, str, str]:
    """Its exit code, stdout and stderr; killed past :data:`LIMIT`."""
    return await run_program(str(installed(name)), args, cwd, env)


async def run_program(
    program: str, args: Sequence[str], cwd: Path, env: dict[str, str]
) -> tuple[int, str, str]:
    """Any program, the same way (``node`` with a script, for one)."""
    await asyncio.to_thread(cwd.mkdir, parents=True, exist_ok=True)
    process = await asyncio.create_subprocess_exec(
        program,
        *args,
        cwd=cwd,
        env=env,
        stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    try:
        out, err = await asyncio.wait_for(process.communicate(), LIMIT)
    except TimeoutError:
        process.kill()
        raise
    return process.returncode or 0, out.decode(), err.decode()
