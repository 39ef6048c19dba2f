"""Anthropic Messages API (``POST {base_url}/v1/messages``), by concern:

- :mod:`.request`: our request → Anthropic's body (system lifted out, roles merged,
  tool calls and results as blocks, ``reasoning_effort`` → a thinking budget);
- :mod:`.structured`: ``response_format`` on Claude (``json_schema`` → structured
  outputs with closed objects, ``json_object`` → a system instruction), shared with
  Bedrock's Converse, which applies Claude's rules;
- :mod:`.upstream`: Anthropic's response format (decode side) and what it means in our
  terms: usage, finish reasons, errors;
- :mod:`.stream`: the SSE stream → our chunks;
- :mod:`.adapter`: the :class:`AnthropicAdapter` the registry builds.
"""

from sluice.providers.anthropic.adapter import AnthropicAdapter

__all__ = ("AnthropicAdapter",)
