"""Rows about hostile load: slow readers, slowloris, hostile uploads."""

from __future__ import annotations
