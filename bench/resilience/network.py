"""Rows about a bad network: client disconnects, upstream resets, failover, stalls."""

from __future__ import annotations
