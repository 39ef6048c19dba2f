"""The resilience suite's fast tier (``bench/resilience``): every row, small counts.

``make resilience`` runs the same rows at full counts and writes bench/RESILIENCE.md.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from bench.resilience import rows
from bench.resilience.harness import ROWS, Context

assert rows  # importing it registers the rows

pytestmark = pytest.mark.alone  # latency ratios: measured with the machine to themselves


@pytest.mark.timeout(240)
@pytest.mark.parametrize("name", list(ROWS))
async def test_fast_tier(name: str, tmp_path: Path) -> None:
    found = await ROWS[name](Context("fast", tmp_path))
    assert found, "a row group measured nothing"
    failed = [f"{r.name}: {r.figure} (must be: {r.criterion})" for r in found if not r.passed]
    assert not failed, "\n".join(failed)
