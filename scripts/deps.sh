#!/usr/bin/env bash
# Debian packages the tests need, installed when missing (`make test` on a fresh
# machine). Today: nginx, which tests/deploy/test_nginx.py runs in front of a gateway.
# Where they cannot be installed (not Debian, not root and no sudo) their tests skip
# with the reason, except under CI=true, where they fail.
set -u
missing=()
command -v nginx >/dev/null 2>&1 || [ -x /usr/sbin/nginx ] || missing+=(nginx)
[ ${#missing[@]} -eq 0 ] && exit 0

if ! command -v apt-get >/dev/null 2>&1; then
  echo "deps: no apt-get; install ${missing[*]} by hand" >&2
  exit 0
fi
sudo=()
if [ "$(id -u)" -ne 0 ]; then
  if ! command -v sudo >/dev/null 2>&1 || ! sudo -n true 2>/dev/null; then
    echo "deps: not root: run 'sudo apt-get install ${missing[*]}'" >&2
    exit 0
  fi
  sudo=(sudo -n)
fi
echo "deps: installing ${missing[*]}" >&2
export DEBIAN_FRONTEND=noninteractive
install=("${sudo[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}")
# the package lists may be absent or stale on a fresh machine: update and try again
if ! "${install[@]}" >/dev/null 2>&1; then
  "${sudo[@]}" apt-get update -qq >/dev/null 2>&1
  "${install[@]}" >/dev/null || echo "deps: could not install ${missing[*]}" >&2
fi
exit 0
