#!/usr/bin/env bash
# Cost of metering on the shared kit: streaming rps with an unmetered key (no hold, no
# ledger) and with a credit-metered key (a hold before, a settlement and a request-log
# row after each request) on SQLite and on PostgreSQL. Gateway on core 1.
#
#   bench/metering.sh            Env: REPS (3) DURATION (5) STORES ("sqlite postgres") KIT PY PG_ADMIN
set -euo pipefail
cd "$(dirname "$0")/.."
KIT="${KIT:-../shared/bench}"
PY="${PY:-.venv/bin/python}"
PG_ADMIN="${PG_ADMIN:-postgresql://postgres@127.0.0.1:5432/postgres}"
export REPS="${REPS:-3}" DURATION="${DURATION:-5}" JSON_CONC="" CONCS="${CONCS:-16 64}"
WORK="$(mktemp -d)"
pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; rm -rf "$WORK"; }
trap cleanup EXIT
wait_port() { for _ in $(seq 100); do (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null && return 0; sleep 0.1; done; return 1; }

taskset -c 0 "$PY" "$KIT/fake_upstream.py" --port 9001 --chunks 20 --chunk-bytes 16 >/dev/null &
pids+=($!); wait_port 9001

run_case() {  # label storage-url
  local label="$1" url="$2" home="$WORK/$1"
  mkdir -p "$home"
  { echo "[storage]"; echo "url = \"$url\""; cat bench/sluice-bench.toml; } > "$home/sluice.toml"
  SLUICE_HOME="$home" .venv/bin/sluice init --config "$home/sluice.toml" >/dev/null
  SLUICE_HOME="$home" .venv/bin/sluice accounts create bench --credits 1000000 \
    --config "$home/sluice.toml" >/dev/null
  local key; key="$(SLUICE_HOME="$home" .venv/bin/sluice keys create --account bench \
    --config "$home/sluice.toml")"
  SLUICE_HOME="$home" taskset -c 1 .venv/bin/sluice serve --config "$home/sluice.toml" \
    --port 8787 --log-level WARNING 2>/dev/null &
  pids+=($!); wait_port 8787
  KEY="$(cat "$home/dev-key")" MODEL=fake-model PY="$PY" "$KIT/run.sh" \
    http://127.0.0.1:8787/v1/chat/completions "$label unmetered" | tail -n +2
  KEY="$key" MODEL=fake-model PY="$PY" "$KIT/run.sh" \
    http://127.0.0.1:8787/v1/chat/completions "$label metered" | tail -n +2
  SLUICE_HOME="$home" .venv/bin/sluice ledger reconcile --config "$home/sluice.toml"
  kill "${pids[-1]}"; wait "${pids[-1]}" 2>/dev/null || true; unset 'pids[-1]'
}

echo "target                 mode conc runs  err      rps     rps_min-max  ttfb50  ttfb99  ttfc50    ttfc50_rng  ttfc99   lat50   lat99 ev/req     ev/s"
for store in ${STORES:-sqlite postgres}; do
  if [ "$store" = sqlite ]; then
    run_case sqlite "sqlite:///$WORK/sqlite/sluice.db"
  else
    DB="sluice_bench_$$"
    psql "$PG_ADMIN" -qc "CREATE DATABASE $DB" >/dev/null
    run_case postgres "${PG_ADMIN%/*}/$DB"
    psql "$PG_ADMIN" -qc "DROP DATABASE $DB WITH (FORCE)" >/dev/null
  fi
done
