"""Rows about secrets and reach: a canary provider key through every error path, SSRF encodings."""

from __future__ import annotations
