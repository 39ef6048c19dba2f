"""Guardrails on the request (input) and on the live response stream (output).

One rule kind per module (:mod:`.regex`, :mod:`.keywords`, :mod:`.pii`,
:mod:`.json_schema`, :mod:`.webhook`), the hold-back window (:mod:`.window`), the pure
stream filter (:mod:`.stream`), the selection per request (:mod:`.selection`) and the
async checks the gateway calls (:mod:`.checks`). See docs/guardrails.md.
"""
