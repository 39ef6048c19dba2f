"""How each backend spells the few things the shared query builders need."""

from __future__ import annotations

import msgspec


class SqlDialect(msgspec.Struct, frozen=True):
    """How a backend spells a numbered parameter, a text field of the JSON record, the
    record read back as JSON text, and a table's index to use (``str.format``
    templates; PostgreSQL's planner needs no hint)."""

    param: str
    field: str
    record: str
    use_index: str


SQLITE = SqlDialect("?{}", "json_extract(record, '$.{}')", "record", "INDEXED BY {}")
POSTGRES = SqlDialect("${}", "(record->>'{}')", "record::text", "")


class Params:
    """The bound arguments of one statement, each added where the SQL text needs it."""

    def __init__(self, dialect: SqlDialect) -> None:
        self.dialect = dialect
        self.values: list[object] = []

    def __call__(self, value: object) -> str:
        self.values.append(value)
        return self.dialect.param.format(len(self.values))
