#!/bin/bash
# Memory stays flat: open model at 20,000 req/s for 65 s, RSS sampled at 10 s and 60 s.
# usage: bench/rss_open_20k.sh [URL]    env: THRONG_LOAD as in compare_wrk.sh
set -euo pipefail
URL=${1:-http://127.0.0.1:43182/health}
B=${THRONG_LOAD:-${CARGO_TARGET_DIR:-target}/release/throng-load}
"$B" url "$URL" --rate 20000 -d 65s > rss_run.txt 2> rss_progress.txt &
PID=$!
sleep 10; R10=$(awk '/VmRSS/{print $2}' /proc/$PID/status)
sleep 50; R60=$(awk '/VmRSS/{print $2}' /proc/$PID/status)
wait $PID
cat rss_run.txt
echo "RSS_KB_10s=$R10 RSS_KB_60s=$R60 growth=$(echo "scale=1; ($R60-$R10)*100/$R10" | bc)%"
