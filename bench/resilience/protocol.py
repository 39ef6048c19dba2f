"""Rows about hostile bytes: malformed SSE and event streams (fuzzed), smuggling
framings, hostile bodies, the Host/path matrix, SQL injection."""

from __future__ import annotations
