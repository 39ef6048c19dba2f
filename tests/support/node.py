"""Node and the npm packages tests/node pins, for the tests that run them.

Absent or stale, a test that asks skips with the reason, except under ``CI=true``,
where it fails (``make test`` installs them: scripts/deps.sh runs ``npm ci``).
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest

NODE_DIR = Path(__file__).parents[1] / "node"


def pinned_node(package: str, *, modules: Path = NODE_DIR / "node_modules") -> str:
    """The node binary, once ``package`` is installed at the version tests/node pins."""
    pinned = json.loads((NODE_DIR / "package.json").read_text())["dependencies"][package]
    manifest = modules / package / "package.json"
    found = shutil.which("node")
    if found is None:
        problem = "node is not installed"
    elif not manifest.exists():
        problem = f"{package} is not installed in tests/node"
    elif json.loads(manifest.read_text())["version"] != pinned:
        problem = f"tests/node/node_modules is stale (not the pinned {package} {pinned})"
    else:
        return found
    message = f"{problem} (make test installs it: scripts/deps.sh)"
    if os.environ.get("CI") == "true":
        pytest.fail(message + " — CI=true requires it")
    pytest.skip(message)
