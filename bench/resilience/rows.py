"""Imports every row module, so that each registers its rows (in this order)."""

from bench.resilience import lifecycle, load, money, neighbours, network, protocol, secrets, uploads

__all__ = ("lifecycle", "load", "money", "neighbours", "network", "protocol", "secrets", "uploads")
