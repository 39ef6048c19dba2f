"""The exchange: one request's life from admission to record, protocol-neutral
(docs/architecture.md)."""
