"""docs/configuration.md is the schema's own reference: every key has a meaning, and
the file is what ``python -m sluice.config.reference`` writes (issue 24: the README's
example claimed every key and lacked a dozen)."""

from __future__ import annotations

from pathlib import Path

import msgspec
from msgspec import inspect as mi

from sluice.config import FileConfig
from sluice.config.reference import field_docs, reference, tables

DOC = Path(__file__).parent.parent / "docs" / "configuration.md"


def every_key() -> list[tuple[str, str]]:
    """``(table path, key)`` of every key of every table, and its meaning."""
    root = mi.type_info(FileConfig)
    assert isinstance(root, mi.StructType)
    found = [(f"file.{name}", doc) for name, doc in field_docs(FileConfig).items()]
    for path, _table, rows in tables(root, "file", set()):
        found += [(f"{path}.{field.name}", meaning) for field, meaning in rows]
    return found


def test_every_key_of_every_table_has_a_meaning_in_the_schema() -> None:
    keys = every_key()
    assert len(keys) > 120
    missing = [path for path, meaning in keys if not meaning.strip()]
    assert not missing, f"keys without a docstring under their field: {missing}"


def test_a_key_without_a_docstring_is_found() -> None:
    class Planted(msgspec.Struct):
        said: int = 1
        """Documented."""
        silent: int = 2

    assert field_docs(Planted) == {"said": "Documented."}


def test_docs_configuration_md_is_the_generated_reference() -> None:
    assert DOC.read_text() == reference(), (
        "docs/configuration.md is stale: python -m sluice.config.reference > docs/configuration.md"
    )


def test_the_reference_names_every_table_and_key() -> None:
    text = DOC.read_text()
    for heading in ("## `[server]`", "## `[[connections]]`", "### `[[connections]]` → `timeouts`",
                    "## `[[guardrails]]`", "### `[[guardrails]]` → `applies_to`"):  # fmt: skip
        assert heading in text
    for path, _meaning in every_key():
        assert f"| `{path.rsplit('.', 1)[1]}` |" in text or path.count(".") == 1, path
