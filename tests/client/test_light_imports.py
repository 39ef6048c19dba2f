"""Importing the client, or the CLI, pulls in no HTTP client, no table library, no
plotting (the core's purity is checked with the rest in tests/test_house_rules.py)."""

from __future__ import annotations

import subprocess
import sys

import pytest


@pytest.mark.parametrize(
    ("module", "absent"),
    [
        ("sluice.client", ("aiohttp", "rich", "matplotlib")),
        ("sluice.cli.main", ("rich", "matplotlib")),
    ],
)
def test_imports_stay_light(module: str, absent: tuple[str, ...]) -> None:
    code = f"import sys, {module}; print([m for m in {absent!r} if m in sys.modules])"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
