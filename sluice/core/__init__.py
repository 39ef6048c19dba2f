"""Value types every layer shares: a connection and its target, token usage and
prices, the chunk batch, the caller. Plain data and their invariants, no I/O
(docs/architecture.md)."""
