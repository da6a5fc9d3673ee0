#!/bin/bash
# Scripts against wrk, over HTTP and HTTPS, and a processor hook against Artillery: each round
# runs, against the same reference server (`examples/health_server.rs`, 2 workers):
#   wrk -t1 -cC, `throng-load url`, and `throng-load run` of a script whose C users loop GETs
#   (the closed model wrk runs), over HTTP, then the same over HTTPS (self-signed: -k, and
#   `tls.rejectUnauthorized: false` in the script);
#   then the script with a `beforeRequest` processor hook on every request (it sets a header),
#   run by throng-load and, when ARTILLERY names its binary, by Artillery.
# A script's rate against Artillery is its report's `http.requests` over the span of its metrics
# (`lastMetricAt - firstMetricAt`), so start-up time counts for neither tool. Against wrk, whose
# connections all open at once, a script's rate is its steady one: its users arrive over the
# first second (`arrivalCount`) and finish as far apart, so the 1 s periods of its report are
# summed leaving out the first two and the last two (`steady_rate_of`).
#
# usage: bench/compare_run.sh ROUNDS SECONDS CONNECTIONS
# env:   THRONG_LOAD   path to throng-load (default: the release build under target/)
#        HEALTH_SERVER path to the example server (default: target/release/examples/health_server)
#        ARTILLERY     path to `artillery` (optional; e.g. node_modules/.bin/artillery)
set -euo pipefail
R=${1:-3}; D=${2:-4}; C=${3:-64}
T=${CARGO_TARGET_DIR:-target}
B=$(realpath "${THRONG_LOAD:-$T/release/throng-load}")
S=$(realpath "${HEALTH_SERVER:-$T/release/examples/health_server}")
HTTP_PORT=43182; HTTPS_PORT=43183
W=$(mktemp -d)
trap 'kill $(jobs -p) 2>/dev/null || true; rm -rf "$W"' EXIT
"$S" $HTTP_PORT 2 2>/dev/null &
"$S" $HTTPS_PORT 2 --tls 2>/dev/null &
sleep 0.5

# Requests per user so a run takes about D seconds at RATE req/s.
per_user() { echo $(( ($1 * D) / C + 1 )); }

script() { # URL LOOPS [processor]
  cat <<YML
config:
  target: "$1"
  tls:
    rejectUnauthorized: false
  phases:
    - duration: 1
      arrivalCount: $C
$( [ -n "${3:-}" ] && printf '  processor: "./hook.js"\n' )
scenarios:
  - flow:
      - loop:
          - get:
              url: "/health"
$( [ -n "${3:-}" ] && printf '              beforeRequest: stamp\n' )
        count: $2
YML
}
cat > "$W/hook.js" <<'JS'
module.exports = { stamp };
let sent = 0;
function stamp(requestParams, context, events, next) {
  sent += 1;
  requestParams.headers = requestParams.headers || {};
  requestParams.headers["x-request-stamp"] = "r" + sent;
  return next();
}
JS

rate_of() { # report.json
  python3 - "$1" <<'PY'
import json, sys
a = json.load(open(sys.argv[1]))["aggregate"]
n = a["counters"].get("http.requests", 0)
span = (a["lastMetricAt"] - a["firstMetricAt"]) / 1000.0
print(f"{n / span:.0f}" if span > 0 else "0")
PY
}

steady_rate_of() { # report.json: requests per second over the periods at full concurrency
  python3 - "$1" <<'PY'
import json, sys
p = json.load(open(sys.argv[1]))["intermediate"][2:-2]
n = sum(x["counters"].get("http.requests", 0) for x in p)
print(f"{n / len(p):.0f}" if p else "0")
PY
}

wrk_rate() { wrk -t1 -c"$C" -d"${D}s" "$1" | awk '/Requests\/sec/{printf "%.0f", $2}'; }
url_rate() { "$B" url "$1" -c "$C" -d "${D}s" -k 2>/dev/null | awk '/Requests\/sec/{printf "%.0f", $2}'; }
run_rate() { # URL RATE_GUESS [processor]: the whole run's rate (as Artillery's is measured)
  script "$1" "$(per_user "$2")" "${3:-}" > "$W/s.yml"
  (cd "$W" && "$B" run s.yml -o "$W/r.json" -q --period 1s >/dev/null 2>&1) || true
  rate_of "$W/r.json"
}
steady_run_rate() { # URL RATE_GUESS: the steady rate, with the whole run's after it
  run_rate "$1" "$2" >/dev/null
  echo "$(steady_rate_of "$W/r.json") $(rate_of "$W/r.json")"
}
ratio() { echo "scale=3; $1/$2" | bc; }

for i in $(seq 1 "$R"); do
  for scheme in http https; do
    port=$HTTP_PORT; [ $scheme = https ] && port=$HTTPS_PORT
    u="$scheme://localhost:$port/health"
    w=$(wrk_rate "$u"); o=$(url_rate "$u")
    read -r r whole < <(steady_run_rate "$scheme://localhost:$port" "$w")
    echo "round $i $scheme: wrk $w url $o run $r (whole run $whole) url/wrk $(ratio "$o" "$w") run/wrk $(ratio "$r" "$w")"
  done
  h=$(run_rate "http://localhost:$HTTP_PORT" 20000 hook)
  line="round $i processor hook: throng-load $h"
  if [ -n "${ARTILLERY:-}" ]; then
    script "http://localhost:$HTTP_PORT" "$(per_user 1000)" hook > "$W/a.yml"
    (cd "$W" && "$ARTILLERY" run a.yml -o "$W/a.json" >/dev/null 2>&1) || true
    a=$(rate_of "$W/a.json")
    line="$line artillery $a throng-load/artillery $(ratio "$h" "$a")"
  fi
  echo "$line"
done
