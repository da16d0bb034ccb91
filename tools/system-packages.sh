#!/usr/bin/env bash
# What the test suite needs that pip cannot install, from Debian's archive, each only where it is
# missing (`make test` runs this once per virtual environment; the stamp is $(VENV)/.system-packages):
#   chromium        tests/service/test_page.py drives the page in it (PHRASAL_CHROMIUM names another)
#   docker-compose  tests/service/test_deploy.py validates deploy/docker-compose.yml with
#                   `docker-compose config` (no Docker engine needed); `docker compose` counts too
# A package that cannot be installed stops here with one line saying which and why.
set -euo pipefail

missing=()
if [ ! -x "${PHRASAL_CHROMIUM:-/usr/bin/chromium}" ]; then
    missing+=(chromium)
fi
if ! command -v docker-compose >/dev/null 2>&1 && ! docker compose version >/dev/null 2>&1; then
    missing+=(docker-compose)
fi
[ ${#missing[@]} -eq 0 ] && exit 0

fail() {
    echo "make test: cannot install ${missing[*]} ($1); install it (Debian: apt-get install ${missing[*]}) and rerun" >&2
    exit 1
}
command -v apt-get >/dev/null 2>&1 || fail "no apt-get on this machine"
sudo=()
if [ "$(id -u)" -ne 0 ]; then
    command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null || fail "apt-get needs root, and sudo is not available without a password"
    sudo=(sudo -n)
fi
echo "make test: installing ${missing[*]} with apt-get (once; the tests need them)" >&2
"${sudo[@]}" apt-get update -qq >/dev/null 2>&1 || fail "apt-get update failed"
"${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null 2>&1 \
    || fail "apt-get install failed"
