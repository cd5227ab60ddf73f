#!/usr/bin/env bash
# readme-screenshot.sh draws docs/dashboard.png, the README's picture of
# the dashboard, from a realistic attack rather than a test's fixtures:
# sluice serve on free loopback ports with an API rule and a login rule
# whose jail bans after 10 denials in 5 minutes, and, for [seconds]:
#
#   - 2,000 clients of the API at 150 checks a second, some over the limit;
#   - 200 users logging in from their own addresses at 5 a second;
#   - 7 addresses brute-forcing the login at 150 checks a second in all,
#     whom the jail bans and whose requests the bans then refuse;
#   - a scraper network on the deny list at 20 a second.
#
# Then headless Chromium opens the dashboard as a wallboard does (the
# token in the URL, /admin/?auth=basic) and saves the screenshot.
#
#   scripts/readme-screenshot.sh [seconds] [output]
#
# Defaults: 60 s, docs/dashboard.png. It builds sluice and stops what it
# started; it needs chromium (scripts/setup.sh installs it).
set -euo pipefail
secs=${1:-60} out=${2:-docs/dashboard.png}
cd "$(dirname "$0")/.."
work=$(mktemp -d)
trap 'kill $(jobs -p) 2>/dev/null || true; wait 2>/dev/null || true; rm -rf "$work"' EXIT
GOFLAGS=-buildvcs=false go build -o "$work/sluice" ./cmd/sluice
port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
api=$(port) adm=$(port)
token=readme-screenshot-token-0123
cat >"$work/sluice.yaml" <<YAML
listen: 127.0.0.1:$api
rules:
  - name: api
    limits: ["2/s", "60/min"]
  - name: login
    limits: ["5/min"]
guard:
  deny: [198.18.0.0/15]
  jails:
    - {name: abuse, rules: [login], max_failures: 10, find_time: 5m, ban_time: 1h}
admin:
  listen: 127.0.0.1:$adm
  token: $token
YAML
"$work/sluice" serve -config "$work/sluice.yaml" >"$work/serve.log" 2>&1 &
for _ in $(seq 50); do curl -sf "http://127.0.0.1:$api/healthz" >/dev/null && break; sleep 0.1; done
bench() { "$work/sluice" bench -quiet -target "http://127.0.0.1:$api" -d "$((secs + 20))s" "$@" >/dev/null 2>&1 & }
bench -rule api -keys 2000 -key-prefix client- -rate 150 -c 16
bench -rule login -keys 200 -key-prefix 192.0.2. -rate 5 -c 2
bench -rule login -keys 7 -key-prefix 203.0.113.1 -rate 150 -c 16
bench -rule api -keys 50 -key-prefix 198.18.0. -rate 20 -c 4
sleep "$secs"
chromium --headless --no-sandbox --disable-gpu --hide-scrollbars --user-data-dir="$work/chromium" \
  --window-size=1280,1500 --timeout=12000 --screenshot="$work/shot.png" \
  "http://admin:$token@127.0.0.1:$adm/admin/?auth=basic" >/dev/null 2>&1
cp "$work/shot.png" "$out"
echo "wrote $out"
curl -s "http://127.0.0.1:$api/metrics" | grep -E '^sluice_guard_total|^sluice_decisions_total\{.*op="take"' >&2
