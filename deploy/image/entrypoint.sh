#!/bin/sh
# The image's entrypoint. Docker and compose secrets are files under /run/secrets: for
# each variable NAME_FILE naming a file there (PGPASSWORD_FILE, SLUICE_ADMIN_KEY_FILE,
# SLUICE_SECRET_KEY_FILE, OPENAI_API_KEY_FILE, ...), NAME is set to the file's content,
# trailing newlines dropped. Other *_FILE variables (SSL_CERT_FILE, ...) are left alone;
# SLUICE_SECRETS_DIR names another directory. Then the command replaces this shell, so
# `sluice serve` itself receives SIGTERM and SIGHUP.
set -eu
secrets_dir=${SLUICE_SECRETS_DIR:-/run/secrets}
for name in $(env | sed -n 's/^\([A-Za-z_][A-Za-z0-9_]*\)_FILE=.*/\1/p'); do
    file=$(printenv "${name}_FILE")
    case $file in
        "$secrets_dir"/*) ;;
        *) continue ;;
    esac
    if printenv "$name" >/dev/null; then
        echo "sluice-entrypoint: both $name and ${name}_FILE are set: keep one" >&2
        exit 1
    fi
    value=$(cat -- "$file")
    export "$name=$value"
    unset "${name}_FILE"
done
exec "$@"
