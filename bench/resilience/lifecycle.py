"""Rows about the process: SIGKILL with live streams, shutdown, and output
guardrails on live streams."""

from __future__ import annotations
