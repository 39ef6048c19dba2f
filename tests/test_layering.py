"""The layering in docs/architecture.md, enforced by import-linter (``make test`` runs
``lint-imports``): the contracts hold on the tree, and break on a planted import."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
LINT = Path(sys.executable).with_name("lint-imports")


def _lint(root: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(root)}
    return subprocess.run(
        [str(LINT), "--no-cache", "--config", str(root / "pyproject.toml")],
        cwd=root,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def test_the_tree_keeps_every_contract() -> None:
    result = _lint(ROOT)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "3 kept, 0 broken" in result.stdout


PLANTED = [
    # (id, file planted, its import, the contract it breaks)
    ("provider-to-transport", "providers/planted.py", "import sluice.transport.http", "Layers"),
    ("wire-to-config", "wire/planted.py", "from sluice.config import FileConfig", "Layers"),
    ("front-door-to-exchange", "frontdoors/planted.py", "import sluice.exchange.state", "Layers"),
    ("core-to-metering", "core/planted.py", "import sluice.metering.charges", "Layers"),
    ("client-to-server", "client/planted.py", "import sluice.server.routes", "client toolkit"),
    ("endpoint-to-app", "server/planted.py", "from sluice.server.app import Gateway", "app.py"),
    (
        "endpoint-to-app-for-typing",
        "server/planted.py",
        "from typing import TYPE_CHECKING\n\n"
        "if TYPE_CHECKING:\n    from sluice.server.app import Gateway",
        "app.py",
    ),
]


@pytest.mark.parametrize(
    ("planted", "statement", "contract"),
    [p[1:] for p in PLANTED],
    ids=[p[0] for p in PLANTED],
)
def test_a_planted_forbidden_import_breaks_a_contract(
    tmp_path: Path, planted: str, statement: str, contract: str
) -> None:
    shutil.copytree(ROOT / "sluice", tmp_path / "sluice")
    shutil.copy(ROOT / "pyproject.toml", tmp_path / "pyproject.toml")
    (tmp_path / "sluice" / planted).write_text(f'"""Planted."""\n\n{statement}\n')
    result = _lint(tmp_path)
    assert result.returncode != 0, result.stdout
    assert "1 broken" in result.stdout
    module = "sluice." + planted.removesuffix(".py").replace("/", ".")
    assert module in result.stdout
    broken = [line for line in result.stdout.splitlines() if "BROKEN" in line]
    assert len(broken) == 1 and contract in broken[0], result.stdout
