"""Sluice: an OpenAI-compatible LLM gateway whose core is streaming."""

__version__ = "0.2.0"
