"""The response cache (docs/cache.md): which requests are the same, what is kept of an
answer, and the bounded store it is kept in."""
