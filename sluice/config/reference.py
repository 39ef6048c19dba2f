"""docs/configuration.md, written from the config schema itself so it cannot drift:
every key of every table, its type and bounds (``msgspec.inspect``), its default, and
its meaning (the docstring under the field in the schema's source).

    python -m sluice.config.reference > docs/configuration.md

``make test`` fails when the file and the schema differ, or when a key has no meaning
(tests/test_config_reference.py).
"""

from __future__ import annotations

import ast
import inspect
import re
import sys
import textwrap
from collections.abc import Iterator
from typing import Any

import msgspec
from msgspec import inspect as mi

from sluice.config import FileConfig

_INTRO = """# Configuration reference

`sluice serve --config sluice.toml` reads one TOML file; without `--config` every key
takes its default (no file is looked for). Every key is optional unless marked *required*; an
unknown key is an error, and so is a name that points nowhere (a model's connection,
a route's model, a model's fallback, a guardrail's route): the gateway does not start,
or a reload (`SIGHUP`, `sluice reload`) is refused, naming it. Secrets are never in the
file: it names the environment variables that hold them (`api_key_env`,
`admin_key_env`, `secret_key_env`). README.md, "Configure it", shows a sample.

This page is generated from the schema (`sluice/config/`) by
`python -m sluice.config.reference`; a test fails when the two differ.
"""


def field_docs(cls: type) -> dict[str, str]:
    """Each field's docstring (the string literal under it in the class body)."""
    body = ast.parse(textwrap.dedent(inspect.getsource(cls))).body[0]
    assert isinstance(body, ast.ClassDef)
    docs: dict[str, str] = {}
    for node, after in zip(body.body, [*body.body[1:], None], strict=True):
        if not (isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name)):
            continue
        if isinstance(after, ast.Expr) and isinstance(after.value, ast.Constant):
            docs[node.target.id] = inspect.cleandoc(str(after.value.value))
    return docs


def _bounds(t: Any) -> str:
    said = []
    for attr, sign in (("ge", "≥"), ("gt", ">"), ("le", "≤"), ("lt", "<"), ("min_length", "≥")):
        value = getattr(t, attr, None)
        if value is not None:
            said.append(f"{sign} {value:,}" if attr != "min_length" else "not empty")
    return f" ({', '.join(said)})" if said else ""


def type_text(t: mi.Type) -> str:
    """A TOML reader's name for ``t``."""
    if isinstance(t, mi.UnionType):
        kinds = [type_text(one) for one in t.types if not isinstance(one, mi.NoneType)]
        return " or ".join(kinds)
    if isinstance(t, mi.LiteralType):
        return "one of " + ", ".join(f"`{msgspec.json.encode(v).decode()}`" for v in t.values)
    if isinstance(t, mi.ListType):
        if isinstance(t.item_type, mi.StructType):
            return "array of tables (below)"
        return f"array of {type_text(t.item_type)}"
    if isinstance(t, mi.DictType):
        if isinstance(t.value_type, mi.StructType):
            return "table of tables (below)"
        return f"table of {type_text(t.value_type)}"
    if isinstance(t, mi.StructType):
        return "table (below)"
    named = {mi.IntType: "integer", mi.FloatType: "number", mi.StrType: "string",
             mi.BoolType: "boolean", mi.AnyType: "any"}  # fmt: skip
    return named.get(type(t), type(t).__name__) + _bounds(t)


def default_text(field: mi.Field) -> str:
    if field.required:
        return "*required*"
    value = field.default if field.default is not msgspec.NODEFAULT else field.default_factory()
    if value is None:
        return "unset"
    if isinstance(value, msgspec.Struct):
        return "see below"
    text = f"`{msgspec.json.encode(value).decode()}`"
    if field.name.endswith("_bytes") and isinstance(value, int) and value >= 1024:
        unit = "MiB" if value >= 1024**2 else "KiB"
        text += f" ({value / (1024**2 if unit == 'MiB' else 1024):g} {unit})"
    return text


def _struct_of(t: mi.Type) -> mi.StructType | None:
    """The table type inside ``t`` (itself, an array's or a table's item, optional)."""
    if isinstance(t, mi.StructType):
        return t
    if isinstance(t, mi.UnionType):
        found = [s for one in t.types if (s := _struct_of(one)) is not None]
        return found[0] if found else None
    if isinstance(t, mi.ListType):
        return _struct_of(t.item_type)
    if isinstance(t, mi.DictType):
        return _struct_of(t.value_type)
    return None


def tables(
    t: mi.StructType, path: str, seen: set[type]
) -> Iterator[tuple[str, mi.StructType, list[tuple[mi.Field, str]]]]:
    """``(heading, table, [(field, meaning)])`` for ``t`` and each table under it,
    depth first; a table type met twice is described once."""
    docs = field_docs(t.cls)
    yield path, t, [(f, docs.get(f.name, "")) for f in t.fields]
    seen.add(t.cls)
    for f in t.fields:
        inner = _struct_of(f.type)
        if inner is not None and inner.cls not in seen:
            yield from tables(inner, f"{path}.{f.name}", seen)


def _heading(path: str, top: mi.Field) -> str:
    """``[server]``, ``[[connections]]``, ``[[connections]]`` → ``timeouts``."""
    table, *inner = path.split(".", 1)
    table = f"`[[{table}]]`" if isinstance(top.type, mi.ListType) else f"`[{table}]`"
    return table + "".join(f" → `{name}`" for name in inner)


def _markdown(docstring: str) -> str:
    """A field's docstring in the file's terms, on one line: ``x`` is `x`, a Python
    None is an unset key."""
    text = " ".join(docstring.split()).replace("``", "`").replace("|", "\\|")
    return re.sub(r"\bNone\b", "unset", text)


def reference() -> str:
    root = mi.type_info(FileConfig)
    assert isinstance(root, mi.StructType)
    sections = field_docs(FileConfig)
    out = [_INTRO]
    for top in root.fields:
        inner = _struct_of(top.type)
        assert inner is not None
        out.append(f"## {_heading(top.name, top)}\n\n{_markdown(sections.get(top.name, ''))}\n")
        for path, _table, rows in tables(inner, top.name, set()):
            if "." in path:
                out.append(f"### {_heading(path, top)}\n")
            out.append("| key | type | default | meaning |\n|---|---|---|---|")
            for field, meaning in rows:
                cells = (
                    f"`{field.name}`",
                    type_text(field.type),
                    default_text(field),
                    _markdown(meaning),
                )
                out.append("| " + " | ".join(cells) + " |")
            out.append("")
    return "\n".join(out)


if __name__ == "__main__":
    sys.stdout.write(reference())
