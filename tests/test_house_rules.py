"""STYLE.md habits enforced as tests: pure cores, no provider names outside providers/,
no module-level mutable state, an import that opens nothing."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

from sluice.providers.registry import PROVIDERS

ROOT = Path(__file__).parent.parent / "sluice"
PURE = [
    *sorted((ROOT / "wire").glob("*.py")),
    *sorted((ROOT / "providers").rglob("*.py")),
    # meter.py drives the store's holds (and shields them from cancellation): not pure
    *sorted(p for p in (ROOT / "metering").glob("*.py") if p.name != "meter.py"),
    ROOT / "limits" / "bucket.py",
    ROOT / "limits" / "decision.py",
    ROOT / "limits" / "headers.py",
    ROOT / "routing" / "plan.py",
    ROOT / "transport" / "address_policy.py",
    *(
        ROOT / "client" / f"{name}.py"
        for name in ("events", "accumulator", "policy", "request", "call", "replay", "measure")
    ),
    ROOT / "routing" / "catalog.py",
    ROOT / "accounts" / "keys.py",
    ROOT / "errors.py",
    ROOT / "config.py",
]
IMPURE_MODULES = {
    "asyncio",
    "aiohttp",
    "aiosqlite",
    "httptools",
    "uvloop",
    "socket",
    "time",
    "os",
    "random",
    "secrets",
    "datetime",
    "threading",
    "subprocess",
    "sqlite3",
}


def imports(path: Path) -> set[str]:
    names = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names |= {a.name.split(".")[0] for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module.split(".")[0])
    return names


def modules() -> list[Path]:
    return sorted(ROOT.rglob("*.py"))


@pytest.mark.parametrize("path", PURE, ids=lambda p: str(p.relative_to(ROOT)))
def test_pure_modules_import_no_io_clock_or_randomness(path: Path) -> None:
    assert imports(path) & IMPURE_MODULES == set()


def test_no_provider_names_outside_providers() -> None:
    kinds = {spec.kind for spec in PROVIDERS}
    offenders = []
    for path in modules():
        if "providers" in path.relative_to(ROOT).parts:
            continue
        tree = ast.parse(path.read_text())
        docstrings = {
            id(n.body[0].value)
            for n in ast.walk(tree)
            if isinstance(n, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef)
            and n.body
            and isinstance(n.body[0], ast.Expr)
        }
        for node in ast.walk(tree):
            if (
                isinstance(node, ast.Constant)
                and isinstance(node.value, str)
                and id(node) not in docstrings
                and node.value.lower() in kinds
            ):
                offenders.append(f"{path.relative_to(ROOT)}:{node.lineno} {node.value!r}")
    assert offenders == []


def test_no_module_level_mutable_state() -> None:
    mutable = (ast.Dict, ast.List, ast.Set, ast.DictComp, ast.ListComp, ast.SetComp)
    offenders = []
    for path in modules():
        for node in ast.parse(path.read_text()).body:
            value = node.value if isinstance(node, ast.Assign | ast.AnnAssign) else None
            if isinstance(value, mutable) or (
                isinstance(value, ast.Call)
                and isinstance(value.func, ast.Name)
                and value.func.id in {"dict", "list", "set", "deque", "defaultdict"}
            ):
                offenders.append(f"{path.relative_to(ROOT)}:{node.lineno}")
            if isinstance(node, ast.Global):
                offenders.append(f"{path.relative_to(ROOT)}:{node.lineno} global")
    assert offenders == []


def test_import_sluice_is_light() -> None:
    code = (
        "import sys, sluice, sluice.wire.sse; "
        "print(sorted(m for m in ('aiohttp', 'aiosqlite', 'httptools', 'asyncio') "
        "if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_source_files_stay_small() -> None:
    sizes = {str(p.relative_to(ROOT)): len(p.read_text().splitlines()) for p in modules()}
    assert {name: n for name, n in sizes.items() if n > 400} == {}
