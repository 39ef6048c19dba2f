"""What one feed of upstream bytes yields, in our chunk model."""

from __future__ import annotations

from sluice.wire.chunks import Choice

ChunkBatch = list[list[Choice]]
"""Chunks produced by one ``feed``: each item is the ``choices`` of one chunk."""
