"""The resilience suite: Sluice tested from outside, as an attacker and a bad network would.

Every row runs against real gateway processes on 127.0.0.1 and says what it measured
(its figure) and what it must be (its pass criterion). ``make resilience`` runs the
full tier and writes ``bench/RESILIENCE.md``; the fast tier (the same rows with small
counts, seconds each) runs in ``make test`` through ``tests/test_resilience.py``.

    .venv/bin/python -m bench.resilience [--tier fast|full] [--only NAME] [--write FILE]
"""
