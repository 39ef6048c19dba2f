"""Rate limits per API key and per account: requests and tokens per window
(docs/api.md#rate-limits).

``bucket`` (arithmetic) and ``decision`` (what a request charges) are pure;
``stores.memory`` and ``stores.redis`` are the async shells; ``headers`` renders a
decision. See docs/limits.md.
"""
