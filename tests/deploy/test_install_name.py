"""The distribution is ``sluice-gateway``: PyPI's ``sluice`` is an unrelated project
(a 2015 ZFS snapshot tool whose sdist does not build), so no text in the repository
may tell anyone to ``pip install sluice`` or one of its extras under that name."""

from __future__ import annotations

import re
import subprocess
import tomllib
from pathlib import Path

ROOT = Path(__file__).parent.parent.parent
WRONG = re.compile(r"""pip3?\s+install\s+(?:-\S+\s+)*['"]?sluice(?![\w-])""")
"""``pip install sluice``, ``pip install 'sluice[server]'``, ``pip install -U sluice``..."""


def tracked_text_files() -> list[Path]:
    listed = subprocess.run(
        ["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, check=True
    ).stdout.split(b"\0")
    found = []
    for name in filter(None, listed):
        path = ROOT / name.decode()
        if path.is_file() and b"\0" not in path.read_bytes()[:4096]:
            found.append(path)
    return found


def test_the_pattern_catches_the_old_name_and_passes_the_new() -> None:
    for wrong in ("pip install sluice", "pip install 'sluice[server]'", 'pip install "sluice"',
                  "pip install -U sluice[aws]", "pip3 install sluice."):  # fmt: skip
        assert WRONG.search(wrong), wrong
    for right in ("pip install sluice-gateway", "pip install 'sluice-gateway[server]'",
                  "pip install sluice_client", "pip install anthropic"):  # fmt: skip
        assert not WRONG.search(right), right


def test_no_text_tells_anyone_to_install_the_old_name() -> None:
    files = tracked_text_files()
    assert len(files) > 100, "git ls-files found too little"
    hits = [
        f"{path.relative_to(ROOT)}:{n}: {line.strip()}"
        for path in files
        if path.name != Path(__file__).name
        for n, line in enumerate(path.read_text(errors="replace").splitlines(), 1)
        if WRONG.search(line)
    ]
    assert not hits, "\n".join(hits)


def test_the_distribution_is_named_sluice_gateway_and_provides_the_sluice_command() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert project["name"] == "sluice-gateway"
    assert project["scripts"]["sluice"].startswith("sluice.")
    assert all("sluice[" not in extra for extras in project["optional-dependencies"].values()
               for extra in extras)  # fmt: skip
