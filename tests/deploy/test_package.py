"""The package as a user installs it, with no repository around: the wheel and sdist
build; the wheel with the ``server`` extra serves the demo from a fresh venv; the
client-only install stays small, without matplotlib, numpy or botocore, and its gateway
commands say which install they need."""

from __future__ import annotations

import json
import urllib.request
import zipfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from sluice import __version__
from tests.deploy.conftest import run, serving, venv, wheel

CLIENT_BUDGET_MB = 80
"""What the client-only install may weigh in site-packages (pip itself included)."""


def test_both_distributions_build_at_the_packages_version(dist: Path) -> None:
    assert wheel(dist).exists() and (dist / f"sluice_gateway-{__version__}.tar.gz").exists()
    with zipfile.ZipFile(wheel(dist)) as shipped:
        names = set(shipped.namelist())
    assert {"sluice/web/toolkit.js", "sluice/routing/catalog.toml", "sluice/py.typed"} <= names


@pytest.fixture
def served(dist: Path, tmp_path: Path) -> Iterator[tuple[str, str]]:
    """``sluice serve`` from a fresh venv holding the wheel with its server extra, run
    from a directory with no Sluice source in it: (base URL, dev key)."""
    bin_dir = venv(tmp_path / "server", f"{wheel(dist)}[server]")
    home = tmp_path / "home"
    with serving([bin_dir / "sluice", "serve", "--port", "0", "--home", home], tmp_path) as url:
        yield url, (home / "dev-key").read_text().strip()


def test_the_wheel_with_its_server_extra_serves_the_demo(served: tuple[str, str]) -> None:
    url, key = served
    body = {"model": "sluice/demo", "stream": True, "max_tokens": 8,
            "messages": [{"role": "user", "content": "hi"}]}  # fmt: skip
    request = urllib.request.Request(
        url + "/v1/chat/completions",
        data=json.dumps(body).encode(),
        headers={"Authorization": f"Bearer {key}", "Content-Type": "application/json"},
    )
    with urllib.request.urlopen(request, timeout=20) as answer:
        events = answer.read().decode().split("\n\n")
    assert events[-2] == "data: [DONE]"
    assert any('"content":"' in e for e in events)


def test_the_client_install_is_small_and_leaves_the_gateway_out(dist: Path, tmp_path: Path) -> None:
    bin_dir = venv(tmp_path / "client", str(wheel(dist)))
    site = next((tmp_path / "client" / "lib").glob("python3*/site-packages"))
    size_mb = sum(p.stat().st_size for p in site.rglob("*") if p.is_file()) / 2**20
    print(f"client-only install: {size_mb:.1f} MB in site-packages")
    assert size_mb < CLIENT_BUDGET_MB
    for absent in ("matplotlib", "numpy", "botocore", "httptools", "asyncpg"):
        probe = run(bin_dir / "python", "-c", f"import {absent}", cwd=tmp_path)
        assert probe.returncode != 0, f"{absent} is installed"
    assert run(bin_dir / "python", "-c", "import sluice.client", cwd=tmp_path).returncode == 0
    assert run(bin_dir / "sluice", "chat", "--help", cwd=tmp_path).returncode == 0
    serve = run(bin_dir / "sluice", "serve", cwd=tmp_path)
    assert serve.returncode == 1 and "pip install 'sluice-gateway[server]'" in serve.stderr
    plot = run(bin_dir / "sluice", "bench", "m", "--plot", tmp_path / "p.png", cwd=tmp_path)
    assert plot.returncode == 2 and "pip install 'sluice-gateway[plot]'" in plot.stderr
    version = run(bin_dir / "sluice", "--version", cwd=tmp_path)
    assert version.stdout.strip() == f"sluice, version {__version__}"
