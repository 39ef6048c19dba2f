"""Tables for people on the terminal (``--json`` is for scripts)."""

from __future__ import annotations

from typing import Any

_PIPED_WIDTH = 1000
"""Columns of a table written to a pipe: the whole table, never cut to 80 columns."""


def print_table(table: Any) -> None:
    """Print a rich table (rich is imported only when a table is shown)."""
    from rich.console import Console

    console = Console(highlight=False)
    if not console.is_terminal:
        console.width = _PIPED_WIDTH
    console.print(table)
