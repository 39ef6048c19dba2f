"""Imports every row module, so that each registers its rows (in this order)."""

from bench.resilience import (
    lifecycle,
    lifecycle_told,
    load,
    money,
    neighbours,
    network,
    protocol,
    resume,
    resume_replicas,
    secrets,
    uploads,
)

__all__ = (
    "lifecycle",
    "lifecycle_told",
    "load",
    "money",
    "neighbours",
    "network",
    "protocol",
    "resume",
    "resume_replicas",
    "secrets",
    "uploads",
)
