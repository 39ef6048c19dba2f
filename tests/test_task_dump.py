"""A test that hits its timeout says which await it was parked on (tests/support/task_dump.py)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

HANGING = """
import asyncio

import pytest


async def parked_on_a_future_nobody_sets() -> None:
    await asyncio.get_running_loop().create_future()


@pytest.mark.timeout(4)
async def test_hangs() -> None:
    await parked_on_a_future_nobody_sets()
"""


def test_a_timed_out_test_prints_its_asyncio_tasks(tmp_path: Path) -> None:
    (tmp_path / "test_hang.py").write_text(HANGING)
    ran = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
         "-p", "tests.support.task_dump", "--rootdir", str(tmp_path), "-c", "/dev/null",
         "-o", "asyncio_mode=auto", str(tmp_path / "test_hang.py")],
        cwd=ROOT, capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    out = ran.stdout + ran.stderr
    assert ran.returncode == 1, out
    assert "Timeout" in out
    assert "asyncio tasks, 3 s before the timeout" in out
    assert "in parked_on_a_future_nobody_sets" in out
