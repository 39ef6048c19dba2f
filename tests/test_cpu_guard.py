"""The CPU guard (``bench/cpu_guard.py``, run by ``make guard``) fails on a planted
slowdown of the hot path: every write to the client made dearer, as a careless change
to the per-chunk path would."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from bench import cpu_guard
from tests.support.databases import missing

PLANT = """
from sluice.server.message import ResponseWriter

_write_now = ResponseWriter.write_now


def _slower(self, data):
    sum(range(3000))  # ~0.6 M instructions a request (~25 writes): about +20 %
    return _write_now(self, data)


ResponseWriter.write_now = _slower
"""


@pytest.mark.timeout(600)
def test_the_guard_fails_on_a_planted_slowdown(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    if shutil.which("valgrind") is None:
        missing("valgrind is not installed (make test installs it: scripts/deps.sh)")
    (tmp_path / "sitecustomize.py").write_text(PLANT)
    assert (
        cpu_guard.main(
            ["--plant", str(tmp_path), "--requests", "60", "--warmup", "20", "--runs", "1"]
        )
        == 1
    )
    assert "FAIL" in capsys.readouterr().out
