"""STYLE.md habits enforced as tests: pure cores, no provider names or provider
environment variables outside providers/, no module-level mutable state, an import that
opens nothing."""

from __future__ import annotations

import ast
import re
import subprocess
import sys
from pathlib import Path

import pytest

from sluice.providers.registry import PROVIDERS

ROOT = Path(__file__).parent.parent / "sluice"
IMPURE_METERING = ("meter.py", "escrow.py")
PURE = [
    *sorted((ROOT / "wire").glob("*.py")),
    *sorted((ROOT / "providers").rglob("*.py")),
    # meter.py drives the store's holds (and shields them from cancellation), escrow.py
    # the store's reservations (and tends them on a timer): not pure
    *sorted(p for p in (ROOT / "metering").glob("*.py") if p.name not in IMPURE_METERING),
    ROOT / "limits" / "bucket.py",
    ROOT / "limits" / "decision.py",
    ROOT / "limits" / "headers.py",
    ROOT / "routing" / "plan.py",
    ROOT / "routing" / "names.py",
    ROOT / "routing" / "capabilities.py",
    ROOT / "transport" / "address_policy.py",
    *(
        ROOT / "client" / f"{name}.py"
        for name in ("events", "accumulator", "policy", "request", "call", "replay", "measure")
    ),
    ROOT / "routing" / "catalog.py",
    ROOT / "accounts" / "keys.py",
    ROOT / "errors.py",
    *sorted((ROOT / "config").glob("*.py")),
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


NOT_PROVIDER_NAMES = frozenset({"compatible", "aws"})
"""Parts of registry kinds that are not provider names: ``compatible`` is a word, and
``aws`` is the vendor whose protocols (SigV4 signing in ``transport/``, event-stream
framing in ``wire/``) are not the provider; its variables are caught as env names."""
KINDS = frozenset(spec.kind for spec in PROVIDERS)
NAMES = frozenset(
    part
    for spec in PROVIDERS
    if not spec.local
    for part in spec.kind.split("-")
    if part not in NOT_PROVIDER_NAMES
)
ENV_NAMES = frozenset(
    name for spec in PROVIDERS for name in (spec.env_key, *spec.region_env) if name
)
ENV_PREFIXES = "|".join(sorted({name.split("_")[0] for name in ENV_NAMES}))
ENV_PATTERN = re.compile(rf"(?<![A-Za-z0-9_])(?:{ENV_PREFIXES})_[A-Z0-9_]+")
WIRE_FORMAT = re.compile(r"openai[- ](?:compatible|style)|^anthropic-beta$", re.IGNORECASE)
"""Prose about the OpenAI wire format (an "OpenAI-compatible server"), not the provider,
and the Messages wire's own header name that a front door reads (the door decides
nothing by it: it passes the names on as ``betas``)."""


def provider_mentions(source: str) -> list[tuple[int, str]]:
    """``(line, literal)`` for each string literal (docstrings aside) that knows a provider.

    A literal knows one when it is a registry kind (``"demo"``, ``"openai-compatible"``),
    contains a provider name in any case (``openai``, ``anthropic``, ``gemini``,
    ``bedrock``, ``deepseek``: the parts of the kinds), or names an environment variable
    of a provider's (``AWS_REGION``, ``OPENAI_API_KEY``: any ``PREFIX_…`` whose prefix
    starts a variable the registry lists). Allowed: the OpenAI wire format in prose
    (``OpenAI-compatible``, ``OpenAI-style``; module paths such as ``sluice.wire.chat``
    and the front door name no provider), docstrings and comments (they explain, they do
    not decide), and lower-case body fields such as ``aws_session_token`` that the wire
    model refuses. A docstring is any string standing alone as a statement (module,
    class, function and attribute docstrings): it can decide nothing.
    """
    tree = ast.parse(source)
    docstrings = {id(n.value) for n in ast.walk(tree) if isinstance(n, ast.Expr)}
    found = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Constant) or not isinstance(node.value, str):
            continue
        text = node.value
        prose = WIRE_FORMAT.sub("", text).lower()
        if id(node) not in docstrings and (
            text.lower() in KINDS
            or any(name in prose for name in NAMES)
            or ENV_PATTERN.search(text)
        ):
            found.append((node.lineno, text))
    return sorted(found)


def provider_offenders(root: Path) -> list[str]:
    """``path:line 'literal'`` for each provider mention under ``root`` outside
    ``root/providers/``."""
    return [
        f"{path.relative_to(root).as_posix()}:{line} {text!r}"
        for path in sorted(root.rglob("*.py"))
        if path.relative_to(root).parts[0] != "providers"
        for line, text in provider_mentions(path.read_text())
    ]


def test_no_provider_names_outside_providers() -> None:
    assert provider_offenders(ROOT) == []


def test_the_provider_name_rule_fails_on_a_planted_tree(tmp_path: Path) -> None:
    (tmp_path / "providers" / "acme").mkdir(parents=True)
    (tmp_path / "providers" / "acme" / "adapter.py").write_text('KIND = "anthropic"\n')
    (tmp_path / "cli").mkdir()
    (tmp_path / "cli" / "serve.py").write_text(
        '"""Serves Anthropic."""\nREGION = env.get("AWS_REGION")\nKIND = "Anthropic"\n'
    )
    assert provider_offenders(tmp_path) == [
        "cli/serve.py:2 'AWS_REGION'",
        "cli/serve.py:3 'Anthropic'",
    ]


def test_provider_names_come_from_the_registry() -> None:
    assert {"openai", "anthropic", "gemini", "bedrock", "deepseek"} == NAMES
    assert {"AWS_REGION", "AWS_DEFAULT_REGION", "OPENAI_API_KEY"} <= ENV_NAMES


@pytest.mark.parametrize(
    ("source", "found"),
    [
        ('if conn.provider == "anthropic":\n    pass\n', [(1, "anthropic")]),
        ('x = "demo"\n', [(1, "demo")]),
        ('x = "openai-compatible"\n', [(1, "openai-compatible")]),
        ('kind = "AWS-Bedrock"\n', [(1, "AWS-Bedrock")]),
        ('msg = "retry on the Gemini quota"\n', [(1, "retry on the Gemini quota")]),
        ('url = "https://api.deepseek.com"\n', [(1, "https://api.deepseek.com")]),
        ('cls = "OpenAIAdapter"\n', [(1, "OpenAIAdapter")]),
        ('region = env.get("AWS_REGION")\n', [(1, "AWS_REGION")]),
        ('key = env["OPENAI_API_KEY"]\n', [(1, "OPENAI_API_KEY")]),
        ('hint = f"set {x} or AWS_DEFAULT_REGION"\n', [(1, " or AWS_DEFAULT_REGION")]),
        ('"""Docs."""\nA = "anthropic"\nB = "AWS_REGION"\n', [(2, "anthropic"), (3, "AWS_REGION")]),
        ('"""Anthropic, Bedrock and AWS_REGION are explained here."""\n', []),
        ('def f() -> None:\n    """Anthropic counts."""\n', []),
        ('LIMIT = 1\n"""Bedrock\'s frames are small."""\n', []),
        ('f("openai")\n', [(1, "openai")]),
        ('help = "any OpenAI-compatible server, OpenAI-style URL"\n', []),
        ('FIELDS = ("aws_session_token", "aws_region_name")\n', []),
        ('msg = "No AWS credentials found"\n', []),
        ('path = "sluice.wire.chat"\n', []),
        ('x = "SLUICE_API_KEY"  # anthropic\n', []),
    ],
    ids=[
        "kind",
        "local-kind",
        "generic-kind",
        "kind-any-case",
        "name-in-text",
        "name-in-url",
        "name-in-identifier-text",
        "region-variable",
        "key-variable",
        "variable-in-f-string",
        "module-docstring-skipped-only",
        "docstring",
        "function-docstring",
        "attribute-docstring",
        "call-argument",
        "wire-format-prose",
        "refused-body-fields",
        "aws-protocol-prose",
        "wire-module-path",
        "own-variable-and-comment",
    ],
)
def test_the_provider_name_rule_catches_planted_mentions(
    source: str, found: list[tuple[int, str]]
) -> None:
    assert provider_mentions(source) == found


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
