"""The rules, the window and the stream filter are pure (STYLE.md habit 1)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.test_house_rules import IMPURE_MODULES, imports

ROOT = Path(__file__).parents[2] / "sluice" / "guardrails"
PURE = ["rule", "regex", "keywords", "pii", "json_schema", "window", "stream"]


@pytest.mark.parametrize("name", PURE)
def test_guardrail_cores_import_no_io_clock_or_randomness(name: str) -> None:
    assert imports(ROOT / f"{name}.py") & IMPURE_MODULES == set()
