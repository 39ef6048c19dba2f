"""Anthropic Messages API (``POST {base_url}/v1/messages``), by concern:

- :mod:`.request`: our request → Anthropic's body (system lifted out, roles merged,
  tool calls and results as blocks, ``reasoning_effort`` → a thinking budget,
  ``response_format`` → structured outputs);
- :mod:`.upstream`: Anthropic's response format (decode side) and what it means in our
  terms: usage, finish reasons, errors;
- :mod:`.stream`: the SSE stream → our chunks;
- :mod:`.adapter`: the :class:`AnthropicAdapter` the registry builds.
"""

from sluice.providers.anthropic.adapter import AnthropicAdapter

__all__ = ("AnthropicAdapter",)
