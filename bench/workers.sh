#!/usr/bin/env bash
# `sluice serve --workers N` on the peer kit: streamed req/s at c=64 (and whole answers at
# c=16) with 1 worker on core 1, then 2 workers on cores 0-1, the development key, the
# kit's fake upstream and load generator on core 0 (so the second worker shares its
# core with them: the scaling shown is a floor).
#
#   bench/workers.sh            Env: REPS (3) DURATION (5) KIT (../shared/bench) PY
set -euo pipefail
cd "$(dirname "$0")/.."
KIT="${KIT:-../shared/bench}"
PY="${PY:-.venv/bin/python}"
export REPS="${REPS:-3}" DURATION="${DURATION:-5}" CONCS="${CONCS:-64}"
[ -f "$KIT/loadgen.py" ] || { echo "no peer kit at $KIT (set KIT)"; exit 1; }
WORK="$(mktemp -d)"
pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; rm -rf "$WORK"; }
trap cleanup EXIT
wait_port() { for _ in $(seq 100); do (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null && return 0; sleep 0.1; done; return 1; }

taskset -c 0 "$PY" "$KIT/fake_upstream.py" --port 9001 --chunks 20 --chunk-bytes 16 >/dev/null &
pids+=($!); wait_port 9001
echo "target                 mode conc runs  err      rps     rps_min-max  ttfb50  ttfb99  ttfc50    ttfc50_rng  ttfc99   lat50   lat99 ev/req     ev/s"
for n in 1 2; do
  cores=$([ "$n" = 1 ] && echo 1 || echo 0,1)
  SLUICE_HOME="$WORK/w$n" taskset -c "$cores" .venv/bin/sluice serve --config bench/sluice-bench.toml \
    --port 8787 --workers "$n" --log-level WARNING 2>/dev/null &
  pids+=($!); wait_port 8787; sleep 1
  KEY="$(cat "$WORK/w$n/dev-key")" MODEL=fake-model PY="$PY" "$KIT/run.sh" \
    http://127.0.0.1:8787/v1/chat/completions "sluice --workers $n" | tail -n +2
  kill "${pids[-1]}"; wait "${pids[-1]}" 2>/dev/null || true; unset 'pids[-1]'
done
