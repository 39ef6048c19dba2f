#!/usr/bin/env bash
# What the tests need beyond the venv, installed when missing (`make test` on a fresh
# machine): Debian packages (nginx, which tests/deploy/test_nginx.py runs in front of a
# gateway; node, which runs the official Node SDK in tests/server/test_messages_node.py;
# chromium, which Playwright drives in tests/console/; valgrind, whose instruction
# counts the CPU guard compares with its baseline; systemd, whose systemd-analyze
# verifies deploy/systemd/sluice.service in tests/deploy/test_recipes.py),
# then tests/node's npm packages from its package-lock.json when node_modules is missing
# or older than the lock. Where they cannot be installed (not Debian, not root and no
# sudo, no registry) their tests skip with the reason, except under CI=true, where they fail.
set -u
cd "$(dirname "$0")/.." || exit 0

debian_packages() {
  local missing=()
  command -v nginx >/dev/null 2>&1 || [ -x /usr/sbin/nginx ] || missing+=(nginx)
  command -v node >/dev/null 2>&1 || missing+=(nodejs)
  command -v npm >/dev/null 2>&1 || missing+=(npm)
  command -v chromium >/dev/null 2>&1 || missing+=(chromium)
  command -v valgrind >/dev/null 2>&1 || missing+=(valgrind)  # the CPU guard (bench/cpu_guard.py)
  command -v systemd-analyze >/dev/null 2>&1 || missing+=(systemd)  # tests/deploy/test_recipes.py
  [ ${#missing[@]} -eq 0 ] && return 0

  if ! command -v apt-get >/dev/null 2>&1; then
    echo "deps: no apt-get; install ${missing[*]} by hand" >&2
    return 0
  fi
  local sudo=()
  if [ "$(id -u)" -ne 0 ]; then
    if ! command -v sudo >/dev/null 2>&1 || ! sudo -n true 2>/dev/null; then
      echo "deps: not root: run 'sudo apt-get install ${missing[*]}'" >&2
      return 0
    fi
    sudo=(sudo -n)
  fi
  echo "deps: installing ${missing[*]}" >&2
  export DEBIAN_FRONTEND=noninteractive
  local install=("${sudo[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}")
  # the package lists may be absent or stale on a fresh machine: update and try again
  if ! "${install[@]}" >/dev/null 2>&1; then
    "${sudo[@]}" apt-get update -qq >/dev/null 2>&1
    "${install[@]}" >/dev/null || echo "deps: could not install ${missing[*]}" >&2
  fi
}

# npm writes node_modules/.package-lock.json when it installs: older than the lock (or
# the manifest), or absent, and what is installed is not what the lock pins
node_packages() {
  local dir=tests/node stamp=tests/node/node_modules/.package-lock.json
  [ "$dir/package-lock.json" -nt "$stamp" ] || [ "$dir/package.json" -nt "$stamp" ] || return 0
  if ! command -v npm >/dev/null 2>&1; then
    echo "deps: no npm; install node and npm, then run 'npm ci --prefix $dir'" >&2
    return 0
  fi
  echo "deps: installing $dir's npm packages (npm ci)" >&2
  npm ci --prefix "$dir" --no-audit --no-fund --loglevel=error >/dev/null \
    || echo "deps: could not install $dir's npm packages (npm ci --prefix $dir)" >&2
}

debian_packages
node_packages
exit 0
