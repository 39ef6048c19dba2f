#!/usr/bin/env bash
# `make bench`: Sluice's figures, in a clone from anywhere. With the peer kit beside the
# repository (../shared/bench, or KIT=...) the peers table (bench/peers.sh: Sluice beside
# the direct upstream, a byte pipe and LiteLLM); always the front doors' table
# (bench/messages_vs_chat.py: chat completions and Messages over the same upstream, on
# the kit's fake upstream or, without it, this repository's bench/fake_upstream.py).
set -euo pipefail
cd "$(dirname "$0")/.."
KIT="${KIT:-../shared/bench}"
if [ -f "$KIT/fake_upstream.py" ] && [ -f "$KIT/run.sh" ]; then
  KIT="$KIT" bench/peers.sh
else
  echo "bench: no peer kit at $KIT; the peers table needs it (its byte pipe and load generator)" >&2
fi
.venv/bin/python -m bench.messages_vs_chat --kit "$KIT" --reps "${REPS:-5}" --duration "${DURATION:-2}"
