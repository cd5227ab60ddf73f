#!/usr/bin/env bash
# setup.sh installs what sluice's tests and its quick start need on a Debian
# machine that already has Go: redis-server and redis-cli, memcached, nginx,
# caddy, node and npm, the firewall tools the export is checked with
# (nftables, ipset, iptables), chromium with chromium-driver (the
# dashboard's tests drive a headless browser), and what the clients of
# clients/ are tested with (Django and Flask for /usr/bin/python3, php-cli
# with php-curl, php-psr and nyholm/psr7, ruby with rack and rack-test),
# from Debian packages; then the pinned dependencies of
# the TypeScript client generated from the HTTP API's OpenAPI description
# (npm ci in clients/typescript, from the npm registry). It is idempotent and
# prints nothing when all are present. It runs apt-get as root, or through sudo
# when not root.
set -euo pipefail

if ! command -v go >/dev/null 2>&1; then
	echo "setup.sh: Go is not installed (or not on PATH); install Go 1.26 or later from https://go.dev/dl/" >&2
	exit 1
fi

# command → Debian package that provides it. nginx lives in /usr/sbin, which
# is not on every user's PATH, so look there too.
declare -A want=(
	[redis-server]=redis-server
	[redis-cli]=redis-tools
	[memcached]=memcached
	[nginx]=nginx
	[caddy]=caddy
	[node]=nodejs
	[npm]=npm
	[nft]=nftables
	[ipset]=ipset
	[iptables-restore]=iptables
	[chromium]=chromium
	[chromedriver]=chromium-driver
	[php]=php-cli
	[ruby]=ruby
)
missing=()
for cmd in "${!want[@]}"; do
	if ! command -v "$cmd" >/dev/null 2>&1 && [ ! -x "/usr/sbin/$cmd" ]; then
		missing+=("${want[$cmd]}")
	fi
done

# Libraries the clients' tests load, which no command reveals: checked
# with dpkg-query where there is one (elsewhere their tests say what is
# missing).
libraries=(python3-django python3-flask php-curl php-psr php-nyholm-psr7 ruby-rack ruby-rack-test)
if command -v dpkg-query >/dev/null 2>&1; then
	installed=$(dpkg-query -W -f='${db:Status-Abbrev} ${Package}\n' "${libraries[@]}" 2>/dev/null || true)
	for pkg in "${libraries[@]}"; do
		if ! grep -q "^ii  *$pkg\$" <<<"$installed"; then
			missing+=("$pkg")
		fi
	done
fi

# install_missing installs the Debian packages of the missing commands.
install_missing() {
	if ! command -v apt-get >/dev/null 2>&1; then
		echo "setup.sh: missing ${missing[*]}, and this is not a Debian-like system with apt-get; install them by hand" >&2
		exit 1
	fi
	sudo=()
	if [ "$(id -u)" -ne 0 ]; then
		if ! command -v sudo >/dev/null 2>&1; then
			echo "setup.sh: missing ${missing[*]}; run as root or install sudo" >&2
			exit 1
		fi
		sudo=(sudo)
	fi
	echo "setup.sh: installing ${missing[*]}" >&2
	export DEBIAN_FRONTEND=noninteractive
	"${sudo[@]}" apt-get update -qq
	"${sudo[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
}
[ ${#missing[@]} -eq 0 ] || install_missing

# The TypeScript client's dependencies, as package-lock.json pins them: npm ci
# again only when the lock is newer than what node_modules holds.
client="$(cd "$(dirname "$0")/.." && pwd)/clients/typescript"
if [ ! -f "$client/node_modules/.package-lock.json" ] || [ "$client/package-lock.json" -nt "$client/node_modules/.package-lock.json" ]; then
	(cd "$client" && npm ci --no-audit --no-fund --loglevel=error >/dev/null)
fi
