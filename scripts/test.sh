#!/usr/bin/env bash
# test.sh runs every check CI runs: setup, gofmt -s, go vet, staticcheck,
# the race-enabled, shuffled test suite of the module, and the tests of the
# nested bench module (compiling its benchmarks without running them).
# It stops at the first failure with a non-zero exit status.
set -euo pipefail
cd "$(dirname "$0")/.."

# staticcheck release that supports Go 1.26 (2026.2.2 = module v0.8.2).
staticcheck_version=v0.8.2

step() { printf '\n== %s\n' "$*" >&2; }

step setup
./scripts/setup.sh

step "gofmt -s"
unformatted=$(gofmt -s -l $(git ls-files --cached --others --exclude-standard '*.go'))
if [ -n "$unformatted" ]; then
	echo "gofmt -s would change these files:" >&2
	echo "$unformatted" >&2
	exit 1
fi

step staticcheck install
gobin=$(go env GOBIN)
[ -n "$gobin" ] || gobin="$(go env GOPATH)/bin"
staticcheck="$gobin/staticcheck"
if ! "$staticcheck" -version 2>/dev/null | grep -q "(${staticcheck_version#v})"; then
	GOBIN="$gobin" go install "honnef.co/go/tools/cmd/staticcheck@$staticcheck_version"
fi

modules=(.)
[ -f bench/go.mod ] && modules+=(bench)
for m in "${modules[@]}"; do
	step "go vet ($m)"
	(cd "$m" && go vet ./...)
	step "staticcheck ($m)"
	(cd "$m" && "$staticcheck" ./...)
done

step "go test -race -shuffle=on ./..."
go test -race -shuffle=on -timeout 15m ./...

if [ -f bench/go.mod ]; then
	step "bench module: tests, benchmarks compiled"
	(cd bench && go test -timeout 5m -run . -bench XXX_compile_only ./...)
fi

step "all checks passed"
