"""Rows about hostile bytes: malformed SSE and event streams (fuzzed), smuggling
framings, hostile bodies, the Host/path matrix, SQL injection (registered here, in
this order).

The stream rows (``protocol_sse``) run the translators in-process (they are pure);
atheris runs in a subprocess of its own (``bench/resilience/protocol_fuzz.py``:
libFuzzer ends the process it runs in). Every other row (``protocol_smuggling``,
``protocol_bodies``, ``protocol_paths``, ``protocol_sql``) talks raw HTTP/1.1
(``protocol_exchange``) to real gateway processes with a fake upstream that records
what reached it. The vectors live in the ``protocol_vectors_*`` modules.
"""

from __future__ import annotations

from bench.resilience import (
    protocol_bodies,
    protocol_paths,
    protocol_smuggling,
    protocol_sql,
    protocol_sse,
)
from bench.resilience.harness import Context, Row, row


@row("malformed SSE and event streams")
async def malformed_streams(ctx: Context) -> list[Row]:
    return await protocol_sse.malformed_streams(ctx)


@row("request smuggling framings")
async def smuggling(ctx: Context) -> list[Row]:
    return await protocol_smuggling.smuggling(ctx)


@row("hostile bodies")
async def hostile_bodies(ctx: Context) -> list[Row]:
    return await protocol_bodies.hostile_bodies(ctx)


@row("Host/path matrix")
async def host_path_matrix(ctx: Context) -> list[Row]:
    return await protocol_paths.host_path_matrix(ctx)


@row("SQL injection in every header and id")
async def sql_injection(ctx: Context) -> list[Row]:
    return await protocol_sql.sql_injection(ctx)
