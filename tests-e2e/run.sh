#!/usr/bin/env bash
# The headless-Chromium page tests: the single entry scripts/test calls.
# Installs playwright-core (npm ci), checks for Debian's Chromium, builds the
# throng binaries when they are missing or older than the sources, then runs
# every tests-e2e/*.test.mjs with Node's built-in test runner. Each test file
# starts its own throng server on a free port with a fresh data folder.
#
# Env: CI=1 makes a missing browser an error (else the tests are skipped);
#      THRONG_E2E_CHROMIUM overrides /usr/bin/chromium;
#      extra arguments go to `node --test` (e.g. --test-name-pattern=429).
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/.." && pwd)"
cd "$root"

chromium="${THRONG_E2E_CHROMIUM:-/usr/bin/chromium}"
if [[ ! -x "$chromium" ]]; then
  if [[ -z "${CI:-}" ]]; then
    echo "SKIPPED (browser tests): install chromium (apt-get install -y chromium chromium-driver)"
    exit 0
  fi
  echo "error: $chromium is missing; the page tests need Debian's Chromium:" >&2
  echo "  apt-get install -y chromium chromium-driver" >&2
  echo "(never a downloaded browser: 'npx playwright install' is not used)" >&2
  exit 1
fi

if ! command -v node >/dev/null || ! command -v npm >/dev/null; then
  echo "error: node (>= 20) and npm are needed for the page tests" >&2
  exit 1
fi

# playwright-core only; it never downloads a browser on install.
if [[ -f "$here/package-lock.json" ]]; then
  (cd "$here" && npm ci --no-audit --no-fund --loglevel=error)
else
  (cd "$here" && npm install --no-audit --no-fund --loglevel=error)
fi

target="${CARGO_TARGET_DIR:-$root/target}"
# True when $1 is missing or any workspace source is newer than it.
stale() {
  [[ ! -x "$1" ]] && return 0
  [[ -n "$(find crates Cargo.toml Cargo.lock -newer "$1" -type f \
      \( -name '*.rs' -o -name '*.toml' -o -name '*.lock' -o -name '*.html' -o -name '*.js' -o -name '*.css' -o -name '*.sql' \) \
      -print -quit)" ]]
}
packages=()
stale "$target/debug/throng" && packages+=(-p throng)
# The load generator's own binary, once its crate has one (the load-report
# test skips itself without it).
if { compgen -G "crates/throng-load/src/bin/*.rs" >/dev/null || [[ -f crates/throng-load/src/main.rs ]]; } && stale "$target/debug/throng-load"; then
  packages+=(-p throng-load)
fi
if (( ${#packages[@]} )); then
  echo "building ${packages[*]} (debug) for the page tests" >&2
  cargo build "${packages[@]}" --bins
fi

# One test file at a time: each starts a server and a browser, and these
# machines have two cores.
shopt -s nullglob
files=("$here"/*.test.mjs)
if (( ${#files[@]} == 0 )); then
  echo "no tests-e2e/*.test.mjs files" >&2
  exit 1
fi
exec node --test --test-concurrency=1 --test-timeout=180000 "$@" "${files[@]}"
