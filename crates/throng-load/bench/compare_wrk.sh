#!/bin/bash
# Closed-model max throughput: alternates `wrk -t1`, `throng-load --engine wire` and
# `throng-load --engine hyper` with the same connection count against one server, one line
# per round (req/s of each and the ratios to wrk). Take the median ratio.
#
# usage: bench/compare_wrk.sh ROUNDS SECONDS CONNECTIONS [URL]
# env:   THRONG_LOAD=path/to/throng-load (default: release build in $CARGO_TARGET_DIR or target)
set -euo pipefail
R=${1:-7}; D=${2:-3}; C=${3:-32}; URL=${4:-http://127.0.0.1:43182/health}
B=${THRONG_LOAD:-${CARGO_TARGET_DIR:-target}/release/throng-load}
for i in $(seq 1 "$R"); do
  w=$(wrk -t1 -c"$C" -d"${D}s" "$URL" | awk '/Requests\/sec/{print $2}')
  o=$("$B" url "$URL" -c "$C" -d "${D}s" --engine wire 2>/dev/null | awk '/Requests\/sec/{print $2}')
  h=$("$B" url "$URL" -c "$C" -d "${D}s" --engine hyper 2>/dev/null | awk '/Requests\/sec/{print $2}')
  echo "wrk $w wire $o hyper $h wire/wrk $(echo "scale=3; $o/$w" | bc) hyper/wrk $(echo "scale=3; $h/$w" | bc)"
done
