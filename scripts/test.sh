#!/usr/bin/env bash
# test.sh runs every check CI runs: setup, gofmt -s, go vet, staticcheck,
# the race-enabled, shuffled test suite of the module, and the tests of the
# nested bench module (compiling its benchmarks without running them).
# Every check runs even when an earlier one failed, so one run shows all
# that is wrong; the exit status is non-zero if any failed.
set -uo pipefail
cd "$(dirname "$0")/.."

# staticcheck release that supports Go 1.26 (2026.2.2 = module v0.8.2).
staticcheck_version=v0.8.2

failed=()
step() { printf '\n== %s\n' "$1" >&2; }
# check NAME CMD... runs CMD and records NAME if it fails.
check() {
	local name=$1
	shift
	step "$name"
	if ! "$@"; then
		failed+=("$name")
	fi
}

step setup
./scripts/setup.sh || exit 1

gofmt_clean() {
	local out
	out=$(git ls-files -z --cached --others --exclude-standard '*.go' | xargs -0 -r gofmt -s -l) || return 1
	if [ -n "$out" ]; then
		echo "gofmt -s would change these files:" >&2
		echo "$out" >&2
		return 1
	fi
}
check "gofmt -s" gofmt_clean

gobin=$(go env GOBIN)
[ -n "$gobin" ] || gobin="$(go env GOPATH)/bin"
staticcheck="$gobin/staticcheck"
if ! "$staticcheck" -version 2>/dev/null | grep -q "(${staticcheck_version#v})"; then
	step "install staticcheck $staticcheck_version"
	GOBIN="$gobin" go install "honnef.co/go/tools/cmd/staticcheck@$staticcheck_version" || exit 1
fi

modules=(.)
[ -f bench/go.mod ] && modules+=(bench)
for m in "${modules[@]}"; do
	check "go vet ($m)" bash -c "cd '$m' && go vet ./..."
	check "staticcheck ($m)" bash -c "cd '$m' && '$staticcheck' ./..."
done

check "go test -race -shuffle=on ./..." go test -race -shuffle=on -timeout 15m ./...

if [ -f bench/go.mod ]; then
	check "bench module: tests, benchmarks compiled" \
		bash -c "cd bench && go test -timeout 5m -run . -bench XXX_compile_only ./..."
fi

if [ ${#failed[@]} -gt 0 ]; then
	printf '\nFAILED:\n' >&2
	printf '  %s\n' "${failed[@]}" >&2
	exit 1
fi
printf '\nall checks passed\n' >&2
