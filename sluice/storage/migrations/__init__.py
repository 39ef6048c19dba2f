"""Schema migrations per backend: ``<backend>/NNNN_name.sql``, applied in order once."""

from __future__ import annotations

from importlib import resources


def migration_scripts(backend: str) -> list[tuple[int, str]]:
    """``(version, script)`` of one backend's migrations, oldest first."""
    out = []
    for entry in resources.files(f"{__name__}.{backend}").iterdir():
        if entry.name.endswith(".sql"):
            out.append((int(entry.name.split("_", 1)[0]), entry.read_text(encoding="utf-8")))
    return sorted(out)
