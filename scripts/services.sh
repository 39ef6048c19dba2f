#!/usr/bin/env bash
# Start PostgreSQL and Redis when they are installed but stopped. Tests that need a
# service that is absent skip with a reason (or fail under CI=true).
set -u
if command -v pg_isready >/dev/null 2>&1 && ! pg_isready -q -h 127.0.0.1 -p 5432; then
  if command -v pg_ctlcluster >/dev/null 2>&1 && [ -d /etc/postgresql ]; then
    for v in /etc/postgresql/*; do
      pg_ctlcluster --skip-systemctl-redirect "$(basename "$v")" main start >/dev/null 2>&1 || true
    done
  fi
fi
if command -v redis-server >/dev/null 2>&1 && command -v redis-cli >/dev/null 2>&1; then
  if ! redis-cli -h 127.0.0.1 -p 6379 ping >/dev/null 2>&1; then
    redis-server --daemonize yes --bind 127.0.0.1 --port 6379 --save "" --appendonly no >/dev/null 2>&1 || true
  fi
fi
exit 0
