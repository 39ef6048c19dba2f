#!/usr/bin/env bash
# Sluice beside its peers on the shared kit (../shared/bench), in one sitting.
#
#   bench/peers.sh [TARGET ...]      TARGET: direct pipe sluice litellm (default: all)
#
# Core 0: fake upstream + load generator. Core 1: the target under test.
# Env: REPS (3) DURATION (5) KIT (../shared/bench) LITELLM (path to a `litellm` binary,
#      in its own venv: pip install 'litellm[proxy]'; skipped when absent)
# Writes raw JSON lines to bench/results/peers-<date>.jsonl and prints one table.
set -euo pipefail
cd "$(dirname "$0")/.."
KIT="${KIT:-../shared/bench}"
PY="${PY:-.venv/bin/python}"
export REPS="${REPS:-3}" DURATION="${DURATION:-5}"
TARGETS=("${@:-direct pipe sluice litellm}")
read -r -a TARGETS <<< "${TARGETS[*]}"
mkdir -p bench/results
RAW="bench/results/peers-$(date +%Y%m%d-%H%M%S).jsonl"
HOME_DIR="$(mktemp -d)"
pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; rm -rf "$HOME_DIR"; }
trap cleanup EXIT

wait_port() { for _ in $(seq 100); do (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null && return 0; sleep 0.1; done; return 1; }
stop_last() { kill "${pids[-1]}" 2>/dev/null || true; wait "${pids[-1]}" 2>/dev/null || true; unset 'pids[-1]'; }

taskset -c 0 "$PY" "$KIT/fake_upstream.py" --port 9001 --chunks 20 --chunk-bytes 16 >/dev/null &
pids+=($!); wait_port 9001

run() {  # label url key model
  KEY="$3" MODEL="$4" PY="$PY" RAW="$RAW" "$KIT/run.sh" "$2" "$1" | tail -n +2
}

echo "target                 mode conc runs  err      rps     rps_min-max  ttfb50  ttfb99  ttfc50    ttfc50_rng  ttfc99   lat50   lat99 ev/req     ev/s"
for target in "${TARGETS[@]}"; do
  case "$target" in
    direct) run direct http://127.0.0.1:9001/v1/chat/completions sk-x fake-model ;;
    pipe)
      taskset -c 1 "$PY" "$KIT/passthrough_aiohttp.py" --port 9100 --upstream http://127.0.0.1:9001 &
      pids+=($!); wait_port 9100
      run aiohttp-pipe http://127.0.0.1:9100/v1/chat/completions sk-x fake-model; stop_last ;;
    sluice)
      SLUICE_HOME="$HOME_DIR" taskset -c 1 .venv/bin/sluice serve --config bench/sluice-bench.toml \
        --port 8787 --log-level WARNING 2>/dev/null &
      pids+=($!); wait_port 8787
      run sluice http://127.0.0.1:8787/v1/chat/completions "$(cat "$HOME_DIR/dev-key")" fake-model
      stop_last ;;
    litellm)
      if [ -z "${LITELLM:-}" ] || [ ! -x "$LITELLM" ]; then echo "litellm: skipped (set LITELLM)"; continue; fi
      LITELLM_MASTER_KEY=sk-bench-1234 taskset -c 1 "$LITELLM" --config "$KIT/litellm_config.yaml" \
        --port 4000 --num_workers 1 >/dev/null 2>&1 &
      pids+=($!); wait_port 4000; sleep 5
      run litellm http://127.0.0.1:4000/v1/chat/completions sk-bench-1234 fake-model; stop_last ;;
  esac
done
echo "raw results: $RAW"
