#!/usr/bin/env bash
# dashboard-overhead.sh measures what open dashboards cost sluice serve:
# the server's CPU per decision (utime+stime from /proc/PID/stat, over the
# decisions sluice bench sent at a fixed rate) with no dashboard and with
# N dashboards streaming the admin API's events, in interleaved passes.
#
#   scripts/dashboard-overhead.sh [passes] [rate] [seconds] [dashboards]
#
# Defaults: 4 passes of each, 4000 checks a second for 15 s, 5 dashboards.
# It builds sluice, serves on free loopback ports and stops what it started.
set -euo pipefail
passes=${1:-4} rate=${2:-4000} secs=${3:-15} dashboards=${4:-5}
cd "$(dirname "$0")/.."
work=$(mktemp -d)
trap 'kill $(jobs -p) 2>/dev/null || true; wait 2>/dev/null || true; rm -rf "$work"' EXIT
GOFLAGS=-buildvcs=false go build -o "$work/sluice" ./cmd/sluice
port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
api=$(port) adm=$(port)
token=dashboard-overhead-token-0123
cat >"$work/sluice.yaml" <<YAML
listen: 127.0.0.1:$api
rules:
  - name: api
    limits: ["2/s"]
admin:
  listen: 127.0.0.1:$adm
  token: $token
YAML
"$work/sluice" serve -config "$work/sluice.yaml" >"$work/serve.log" 2>&1 &
pid=$!
for _ in $(seq 100); do curl -sf "http://127.0.0.1:$api/healthz" >/dev/null && break; sleep 0.1; done
cpu() { awk '{print $14 + $15}' "/proc/$pid/stat"; } # clock ticks
hz=$(getconf CLK_TCK)
pass() { # $1: dashboards streaming
	local streams=() before after n
	for _ in $(seq "$1"); do
		curl -sN -H "Authorization: Bearer $token" "http://127.0.0.1:$adm/admin/api/events" >/dev/null &
		streams+=($!)
	done
	sleep 2 # the streams open and receive their first snapshots
	before=$(cpu)
	n=$("$work/sluice" bench -server "http://127.0.0.1:$api" -rule api -keys 1000 -rate "$rate" -d "${secs}s" -quiet -json | python3 -c 'import json,sys; r = json.load(sys.stdin); print(r["allowed"] + r["over_limit"])')
	after=$(cpu)
	[ ${#streams[@]} -eq 0 ] || kill "${streams[@]}" 2>/dev/null || true
	python3 -c "print(f'dashboards=$1 decisions=$n cpu-us/decision={($after-$before)/$hz/$n*1e6:.2f}')"
}
for _ in $(seq "$passes"); do
	pass 0
	pass "$dashboards"
done
