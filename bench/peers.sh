#!/usr/bin/env bash
# Sluice beside its peers on the shared kit (../shared/bench), in one sitting.
#
#   bench/peers.sh [TARGET ...]
#     TARGET: direct pipe sluice sluice-metered sluice-metered-pg litellm (default: all)
#       sluice             the development key (unmetered), SQLite
#       sluice-metered     a credit-metered key (hold, settle, request-log row), SQLite
#       sluice-metered-pg  a credit-metered key on PostgreSQL (PG_ADMIN's server)
#       sluice-resumable   sluice-metered with a resumable key: every stream keeps its
#                          events for a reconnect (docs/api.md#resumable-streams)
#       sluice-resumable-redis  the same with [limits] redis_url: every stream is also
#                          mirrored to Redis for other processes (docs/api.md#several-replicas)
#       sluice-cached      sluice-metered with the model's response cache on: the load
#                          generator's identical requests are all hits after the first
#                          (docs/cache.md)
#
# Core 0: fake upstream + load generator. Core 1: the target under test.
# Env: REPS (3) DURATION (5) KIT (../shared/bench) LITELLM (path to a `litellm` binary,
#      in its own venv: pip install 'litellm[proxy]'; skipped when absent)
#      PG_ADMIN (postgresql://postgres@127.0.0.1:5432/postgres) PROFILE (a directory: a
#      py-spy profile of each Sluice target, when py-spy is installed: raw folded stacks,
#      sampled only while a thread holds the GIL, so a C call that releases it, such as
#      os.urandom or a SQLite step, is not counted as Python time)
# Writes raw JSON lines to bench/results/peers-<date>.jsonl and prints one table.
set -euo pipefail
cd "$(dirname "$0")/.."
KIT="${KIT:-../shared/bench}"
PY="${PY:-.venv/bin/python}"
PG_ADMIN="${PG_ADMIN:-postgresql://postgres@127.0.0.1:5432/postgres}"
export REPS="${REPS:-3}" DURATION="${DURATION:-5}"
TARGETS=("${@:-direct pipe sluice sluice-metered sluice-metered-pg litellm}")
read -r -a TARGETS <<< "${TARGETS[*]}"
[ -f "$KIT/loadgen.py" ] || { echo "no peer kit at $KIT (set KIT)"; exit 1; }
mkdir -p bench/results
RAW="bench/results/peers-$(date +%Y%m%d-%H%M%S).jsonl"
WORK="$(mktemp -d)"
DB="sluice_peers_$$"
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  psql "$PG_ADMIN" -qc "DROP DATABASE IF EXISTS $DB WITH (FORCE)" >/dev/null 2>&1 || true
  rm -rf "$WORK"
}
trap cleanup EXIT

wait_port() {  # port [tenths of a second, 100]
  for _ in $(seq "${2:-100}"); do (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null && return 0; sleep 0.1; done
  echo "nothing listens on port $1" >&2; return 1
}
stop_last() { kill "${pids[-1]}" 2>/dev/null || true; wait "${pids[-1]}" 2>/dev/null || true; unset 'pids[-1]'; }

taskset -c 0 "$PY" "$KIT/fake_upstream.py" --port 9001 --chunks 20 --chunk-bytes 16 >/dev/null &
pids+=($!); wait_port 9001

run() {  # label url key model
  KEY="$3" MODEL="$4" PY="$PY" RAW="$RAW" "$KIT/run.sh" "$2" "$1" | tail -n +2
}

sluice_home() {  # name storage-url [metered|resumable]: a home with its config; prints the key to use
  local home="$WORK/$1"
  mkdir -p "$home"
  { echo "[storage]"; echo "url = \"$2\""; cat bench/sluice-bench.toml; } > "$home/sluice.toml"
  if [ -n "${CACHE:-}" ]; then echo "cache = { ttl = 3600 }" >> "$home/sluice.toml"; fi
  if [ -n "${REDIS_URL:-}" ]; then
    printf '[limits]\nredis_url = "%s"\nkey_prefix = "sluice-bench:%s:"\n' "$REDIS_URL" "$$" \
      >> "$home/sluice.toml"
  fi
  SLUICE_HOME="$home" .venv/bin/sluice init --config "$home/sluice.toml" >/dev/null
  if [ -n "${3:-}" ]; then
    SLUICE_HOME="$home" .venv/bin/sluice accounts create bench --credits 1000000 \
      --config "$home/sluice.toml" >/dev/null
    local resumable=()
    [ "$3" = resumable ] && resumable=(--resumable)
    SLUICE_HOME="$home" .venv/bin/sluice keys create --account bench "${resumable[@]}" \
      --config "$home/sluice.toml"
  fi
}

sluice() {  # label storage-url [metered]
  local home="$WORK/$1" key
  key="$(sluice_home "$@")"
  SLUICE_HOME="$home" taskset -c 1 .venv/bin/sluice serve --config "$home/sluice.toml" \
    --port 8787 --log-level WARNING 2>/dev/null &
  pids+=($!); wait_port 8787
  [ -n "$key" ] || key="$(cat "$home/dev-key")"
  local spy=()
  if [ -n "${PROFILE:-}" ] && command -v py-spy >/dev/null; then
    mkdir -p "$PROFILE"
    py-spy record --gil -p "${pids[-1]}" -r 200 -f raw -o "$PROFILE/$1.txt" >/dev/null 2>&1 &
    spy=($!)
  fi
  run "$1" http://127.0.0.1:8787/v1/chat/completions "$key" fake-model
  for p in "${spy[@]}"; do kill -INT "$p"; wait "$p" 2>/dev/null || true; done
  if [ -n "${3:-}" ]; then
    SLUICE_HOME="$home" .venv/bin/sluice ledger reconcile --config "$home/sluice.toml" >&2
  fi
  stop_last
}

echo "target                 mode conc runs  err      rps     rps_min-max  ttfb50  ttfb99  ttfc50    ttfc50_rng  ttfc99   lat50   lat99 ev/req     ev/s"
for target in "${TARGETS[@]}"; do
  case "$target" in
    direct) run direct http://127.0.0.1:9001/v1/chat/completions sk-x fake-model ;;
    pipe)
      taskset -c 1 "$PY" "$KIT/passthrough_aiohttp.py" --port 9100 --upstream http://127.0.0.1:9001 &
      pids+=($!); wait_port 9100
      run aiohttp-pipe http://127.0.0.1:9100/v1/chat/completions sk-x fake-model; stop_last ;;
    sluice) sluice sluice "sqlite:///$WORK/sluice/sluice.db" ;;
    sluice-metered) sluice sluice-metered "sqlite:///$WORK/sluice-metered/sluice.db" metered ;;
    sluice-cached) CACHE=1 sluice sluice-cached "sqlite:///$WORK/sluice-cached/sluice.db" metered ;;
    sluice-resumable) sluice sluice-resumable "sqlite:///$WORK/sluice-resumable/sluice.db" resumable ;;
    sluice-resumable-redis)
      REDIS_URL="${REDIS_URL:-redis://127.0.0.1:6379/0}" \
        sluice sluice-resumable-redis "sqlite:///$WORK/sluice-resumable-redis/sluice.db" resumable ;;
    sluice-metered-pg)
      psql "$PG_ADMIN" -qc "CREATE DATABASE $DB" >/dev/null
      sluice sluice-metered-pg "${PG_ADMIN%/*}/$DB" metered ;;
    litellm)
      if [ -z "${LITELLM:-}" ] || [ ! -x "$LITELLM" ]; then echo "litellm: skipped (set LITELLM)"; continue; fi
      LITELLM_MASTER_KEY=sk-bench-1234 taskset -c 1 "$LITELLM" --config "$KIT/litellm_config.yaml" \
        --port 4000 --num_workers 1 >/dev/null 2>&1 &
      pids+=($!); wait_port 4000 900; sleep 5  # LiteLLM takes 20-30 s to start here
      run litellm http://127.0.0.1:4000/v1/chat/completions sk-bench-1234 fake-model; stop_last ;;
    *) echo "unknown target: $target" >&2; exit 2 ;;
  esac
done
echo "raw results: $RAW"
