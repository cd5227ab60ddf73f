#!/usr/bin/env bash
# clients-overhead.sh measures each client's own CPU per call (Python,
# PHP, Ruby) against the bare round trip of the same request on a
# kept-alive connection, with clients/*/bench.*, against one sluice serve
# (memory store, clients/testdata/bench.yaml) on a free loopback port.
#
#   scripts/clients-overhead.sh [runs] [calls] [passes] [languages]
#
# Defaults: 3 runs of each language's bench, interleaved, each of 7 passes
# of 2000 calls; languages "python php ruby". Each line gives the median
# overhead in µs and in % of the bare round trip, with the spread (min-max)
# of the passes. It builds sluice, serves and stops what it started.
set -euo pipefail
runs=${1:-3} calls=${2:-2000} passes=${3:-7} langs=${4:-python php ruby}
cd "$(dirname "$0")/.."
work=$(mktemp -d)
trap 'kill $(jobs -p) 2>/dev/null || true; wait 2>/dev/null || true; rm -rf "$work"' EXIT
GOFLAGS=-buildvcs=false go build -o "$work/sluice" ./cmd/sluice
"$work/sluice" serve -config clients/testdata/bench.yaml -listen 127.0.0.1:0 -watch=false >"$work/out" 2>"$work/log" &
for _ in $(seq 100); do grep -q '^sluice: listening on ' "$work/out" && break; sleep 0.1; done
url=$(sed -n 's/^sluice: listening on //p' "$work/out")
[ -n "$url" ] || { cat "$work/log" >&2; exit 1; }
for _ in $(seq "$runs"); do
	for lang in $langs; do
		case $lang in
		python) python3 clients/python/bench.py "$url" "$calls" "$passes" ;;
		php) php clients/php/bench.php "$url" "$calls" "$passes" ;;
		ruby) ruby -Iclients/ruby/lib clients/ruby/bench.rb "$url" "$calls" "$passes" ;;
		*) echo "unknown language $lang" >&2; exit 2 ;;
		esac
	done
done
