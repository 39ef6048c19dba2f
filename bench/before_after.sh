#!/usr/bin/env bash
# Two revisions of Sluice and the aiohttp byte pipe on the peer kit, in one sitting,
# interleaved rep by rep so the machine's drift spreads over all three.
#
#   bench/before_after.sh REV [REPS]     e.g. bench/before_after.sh abecdd4 5
#   TARGET=sluice-metered-pg bench/before_after.sh REV    (as bench/peers.sh names them:
#     sluice, the development key; sluice-metered, a credit-metered key on SQLite;
#     sluice-metered-pg, one on PostgreSQL at PG_ADMIN's server)
#
# REV is checked out in a temporary worktree and run from there with this tree's venv;
# "after" is this working tree. Core 0: fake upstream + load generator; core 1: the
# target. Needs the kit (KIT, default ../shared/bench). Prints one table per target.
set -euo pipefail
cd "$(dirname "$0")/.."
REV="${1:?usage: bench/before_after.sh REV [REPS]}"; REPS="${2:-5}"
KIT="${KIT:-../shared/bench}"; PY="$PWD/.venv/bin/python"; AFTER="$PWD"
TARGET="${TARGET:-sluice}"
PG_ADMIN="${PG_ADMIN:-postgresql://postgres@127.0.0.1:5432/postgres}"
[ -f "$KIT/loadgen.py" ] || { echo "no peer kit at $KIT (set KIT)"; exit 1; }
KIT="$(cd "$KIT" && pwd)"
OUT="$(mktemp -d)"; BEFORE="$OUT/before"
git worktree add --detach -q "$BEFORE" "$REV"
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  git worktree remove --force "$BEFORE" 2>/dev/null || true
  drop_dbs
}
trap cleanup EXIT
wait_port() { for _ in $(seq 100); do (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null && return 0; sleep 0.1; done; return 1; }
taskset -c 0 "$PY" "$KIT/fake_upstream.py" --port 9001 --chunks 20 --chunk-bytes 16 >/dev/null &
pids+=($!); wait_port 9001
dbs=()
drop_dbs() { for db in "${dbs[@]}"; do psql "$PG_ADMIN" -qc "DROP DATABASE IF EXISTS $db WITH (FORCE)" >/dev/null 2>&1 || true; done; }
sluice_cli() {  # tree home args...: that tree's `sluice`
  local tree="$1" home="$2"; shift 2
  SLUICE_HOME="$home" PYTHONPATH="$tree" "$PY" -c "from sluice.cli.main import main; main()" "$@"
}
gateway() {  # tree port: starts it, sets TARGET_PID and KEY
  local home url; home="$(mktemp -d -p "$OUT")"
  case "$TARGET" in
    sluice-metered-pg) local db="sluice_ba_$$_$RANDOM"; dbs+=("$db")
      psql "$PG_ADMIN" -qc "CREATE DATABASE $db" >/dev/null; url="${PG_ADMIN%/*}/$db" ;;
    *) url="sqlite:///$home/sluice.db" ;;
  esac
  { echo "[storage]"; echo "url = \"$url\""; cat "$1/bench/sluice-bench.toml"; } > "$home/sluice.toml"
  sluice_cli "$1" "$home" init --config "$home/sluice.toml" >/dev/null
  KEY=""
  if [ "$TARGET" != sluice ]; then
    sluice_cli "$1" "$home" accounts create bench --credits 1000000 --config "$home/sluice.toml" >/dev/null
    KEY="$(sluice_cli "$1" "$home" keys create --account bench --config "$home/sluice.toml")"
  fi
  SLUICE_HOME="$home" PYTHONPATH="$1" taskset -c 1 "$PY" -c "from sluice.cli.main import main; main()" \
    serve --config "$home/sluice.toml" --port "$2" --log-level WARNING 2>/dev/null &
  TARGET_PID=$!; wait_port "$2"; [ -n "$KEY" ] || KEY="$(cat "$home/dev-key")"
}
for rep in $(seq "$REPS"); do
  for t in before after pipe; do
    case $t in
      before) gateway "$BEFORE" 8781; URL=http://127.0.0.1:8781/v1/chat/completions ;;
      after) gateway "$AFTER" 8782; URL=http://127.0.0.1:8782/v1/chat/completions ;;
      pipe) taskset -c 1 "$PY" "$KIT/passthrough_aiohttp.py" --port 9100 \
              --upstream http://127.0.0.1:9001 >/dev/null 2>&1 &
            TARGET_PID=$!; wait_port 9100; URL=http://127.0.0.1:9100/v1/chat/completions; KEY=sk-x ;;
    esac
    REPS=1 KEY="$KEY" MODEL=fake-model PY="$PY" RAW="$OUT/$t.jsonl" "$KIT/run.sh" "$URL" "$t" >/dev/null
    kill "$TARGET_PID"; wait "$TARGET_PID" 2>/dev/null || true
    echo "rep $rep: $t done" >&2
  done
done
for t in before after pipe; do "$PY" "$KIT/aggregate.py" < "$OUT/$t.jsonl" | tail -n +"$([ $t = before ] && echo 1 || echo 2)"; done
