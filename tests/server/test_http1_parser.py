"""The llhttp under the server is one whose strictness the ``test_http1_*`` tables pin:
the installed httptools lies within the range ``pyproject.toml`` declares."""

from __future__ import annotations

import tomllib
from importlib.metadata import version
from pathlib import Path

from packaging.requirements import Requirement
from packaging.version import Version

PYPROJECT = Path(__file__).parents[2] / "pyproject.toml"


def test_the_installed_httptools_is_within_the_declared_range() -> None:
    project = tomllib.loads(PYPROJECT.read_text())["project"]
    server = project["optional-dependencies"]["server"]  # the gateway's extra
    (declared,) = [r for r in map(Requirement, server) if r.name == "httptools"]
    assert {s.operator for s in declared.specifier} == {">=", "<"}  # a range, both ends
    assert declared.specifier.contains(Version(version("httptools")))
