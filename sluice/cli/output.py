"""Tables for people on the terminal (``--json`` is for scripts)."""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any

_PIPED_WIDTH = 1000
"""Columns of a table written to a pipe: the whole table, never cut to 80 columns."""


def _console() -> Any:
    from rich.console import Console

    console = Console(highlight=False)
    if not console.is_terminal and not os.environ.get("COLUMNS", "").isdigit():
        console.width = _PIPED_WIDTH
    return console


def print_table(table: Any) -> None:
    """Print a rich table (rich is imported only when a table is shown): as wide as the
    terminal, or ``COLUMNS``; the whole table in a pipe when neither says."""
    _console().print(table)


def print_fitting(tables: Sequence[Any]) -> None:
    """Print the first of ``tables`` (the fullest first) that fits the width without
    wrapping, else the last: a narrow terminal gets fewer columns, not one letter each."""
    console = _console()
    unbounded = console.options.update_width(_PIPED_WIDTH)
    for table in tables[:-1]:
        if console.measure(table, options=unbounded).maximum <= console.width:
            console.print(table)
            return
    console.print(tables[-1])
