"""The commands' output as a pipe shows it: pytest-xdist's workers export ``COLUMNS=80``
(a terminal's width), which the tables honour (sluice/cli/output.py); a test that wants
a width sets it."""

from __future__ import annotations

import pytest


@pytest.fixture(autouse=True)
def _no_terminal_width(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("COLUMNS", raising=False)
