"""What the deploy tests share: the wheel and sdist, built once per run, and fresh
venvs and gateways started from them as a user would."""

from __future__ import annotations

import fcntl
import os
import re
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from sluice import __version__

ROOT = Path(__file__).parent.parent.parent
LISTENING = re.compile(r"listening on (https?://127\.0\.0\.1:\d+)")


def clean_env() -> dict[str, str]:
    """This environment without this venv's traces (``VIRTUAL_ENV``, ``PYTHON*``)."""
    return {k: v for k, v in os.environ.items() if not k.startswith(("VIRTUAL_ENV", "PYTHON"))}


def run(*args: str | Path, cwd: Path, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    argv = [str(a) for a in args]
    return subprocess.run(
        argv, check=False, cwd=cwd, env=clean_env(), capture_output=True, text=True, timeout=timeout
    )


@pytest.fixture(scope="session")
def dist(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The wheel and sdist of this tree, built once per run: pytest-xdist's workers share
    one build (two at once would race on the tree's ``*.egg-info``)."""
    shared = tmp_path_factory.getbasetemp()
    if os.environ.get("PYTEST_XDIST_WORKER"):
        shared = shared.parent  # this run's, above every worker's own
    out = shared / "dist"
    with (shared / "dist.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not (out / "built").exists():
            argv = (sys.executable, "-m", "build", "--wheel", "--sdist", "--outdir", out, ROOT)
            built = run(*argv, cwd=shared)
            assert built.returncode == 0, built.stdout + built.stderr
            (out / "built").touch()
    return out


def venv(where: Path, requirement: str) -> Path:
    made = run(sys.executable, "-m", "venv", where, cwd=where.parent)
    assert made.returncode == 0, made.stderr
    installed = run(where / "bin" / "pip", "install", "-q", requirement, cwd=where.parent)
    assert installed.returncode == 0, installed.stdout + installed.stderr
    return where / "bin"


def wheel(dist: Path) -> Path:
    [found] = dist.glob(f"sluice_gateway-{__version__}-py3-none-any.whl")
    return found


@contextmanager
def serving(argv: list[str | Path], cwd: Path, env: dict[str, str] | None = None) -> Iterator[str]:
    """``argv`` (a ``sluice serve``) run in ``cwd``, its stderr in ``cwd/gateway.log``:
    its base URL once it listens; stopped on leaving."""
    log = cwd / "gateway.log"
    with log.open("w") as stderr:
        proc = subprocess.Popen(argv, cwd=cwd, env=env or clean_env(), stderr=stderr, text=True)
    try:
        deadline = time.monotonic() + 30
        while (found := LISTENING.search(log.read_text())) is None:
            assert proc.poll() is None, f"the gateway exited: {log.read_text()}"
            assert time.monotonic() < deadline, f"the gateway did not start: {log.read_text()}"
            time.sleep(0.05)
        yield found[1]
    finally:
        proc.terminate()
        proc.wait(10)
