#!/usr/bin/env bash
# run.sh runs the comparison of sluice with its peers: every benchmark of
# the bench module matching PATTERN (default: all), interleaved — several
# passes of -count 1 over all implementations rather than one block of
# -count N each, so load drifting on a shared machine hits every
# implementation alike. It saves the raw output under bench/results/,
# summarises it with benchstat (one column per implementation) and prints
# the ratio sluice/peer per scenario (bench/cmd/ratio).
#
# Usage: bench/run.sh [PATTERN]
#
# Environment:
#   BENCH_PASSES  passes over all benchmarks (default 6; 2 when BENCH_QUICK=1)
#   BENCH_TIME    -benchtime of each benchmark in each pass (default 100ms;
#                 50ms when BENCH_QUICK=1)
#   BENCH_QUICK   1 for a quick look: fewer, shorter passes
#
# Benchmarks that need Redis or memcached start their own servers on
# loopback from the Go test code; they run here like the others.
set -euo pipefail
cd "$(dirname "$0")"

pattern=${1:-.}
if [ "${BENCH_QUICK:-0}" = 1 ]; then
	passes=${BENCH_PASSES:-2}
	benchtime=${BENCH_TIME:-50ms}
else
	passes=${BENCH_PASSES:-6}
	benchtime=${BENCH_TIME:-100ms}
fi

gobin=$(go env GOBIN)
[ -n "$gobin" ] || gobin="$(go env GOPATH)/bin"
benchstat="$gobin/benchstat"
if ! [ -x "$benchstat" ]; then
	echo "installing benchstat" >&2
	GOBIN="$gobin" go install golang.org/x/perf/cmd/benchstat@latest
fi

mkdir -p results
stamp=$(date -u +%Y%m%dT%H%M%SZ)
raw="results/$stamp.txt"
bin="results/$stamp.bin"
mkdir -p "$bin"

# Build each package's test binary once, so the passes measure only
# benchmarks, not compilation.
pkgs=()
while IFS= read -r line; do
	pkgs+=("$line")
done < <(go list -f '{{if or .TestGoFiles .XTestGoFiles}}{{.ImportPath}} {{.Dir}}{{end}}' ./...)
if [ ${#pkgs[@]} -eq 0 ]; then
	echo "run.sh: no package with benchmarks" >&2
	exit 1
fi
for p in "${pkgs[@]}"; do
	path=${p%% *}
	go test -c -o "$bin/$(echo "$path" | tr '/' '_').test" "$path"
done

# Configuration lines in the benchmark format (key: value) describe the run.
{
	echo "pattern: $pattern"
	echo "passes: $passes"
	echo "benchtime: $benchtime"
	echo "kernel: $(uname -sr)"
	echo "cores: $(nproc)"
	echo "go: $(go env GOVERSION)"
	echo "commit: $(git rev-parse --short HEAD 2>/dev/null || echo unknown)"
	echo "load-before: $(cut -d' ' -f1-3 /proc/loadavg)"
} >"$raw"

start=$SECONDS
for pass in $(seq 1 "$passes"); do
	echo "pass $pass/$passes ($((SECONDS - start)) s so far)" >&2
	for p in "${pkgs[@]}"; do
		path=${p%% *}
		dir=${p#* }
		test=$PWD/$bin/$(echo "$path" | tr '/' '_').test
		# Run in the package directory, as go test does, for testdata.
		(cd "$dir" && "$test" -test.run '^$' -test.bench "$pattern" \
			-test.count 1 -test.benchtime "$benchtime" -test.timeout 30m) >>"$raw"
	done
done
rm -rf "$bin"
echo "done in $((SECONDS - start)) s; raw output: bench/$raw" >&2

"$benchstat" -col /impl "$raw" >"results/$stamp.benchstat.txt" 2>&1 || true
echo "benchstat by implementation: bench/results/$stamp.benchstat.txt" >&2

go run ./cmd/ratio "$raw" | tee "results/$stamp.ratio.md"
echo "ratio tables: bench/results/$stamp.ratio.md" >&2
