"""Sluice: an OpenAI-compatible LLM gateway whose core is streaming."""

__version__ = "0.1.0"
