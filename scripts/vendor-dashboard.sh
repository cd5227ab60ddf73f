#!/usr/bin/env bash
# vendor-dashboard.sh copies the dashboard's chart library (uPlot, at the
# version server/admin/web/package-lock.json pins, checked by npm ci against
# its integrity hash) into internal/uplot, which the sluice binary
# embeds: the dashboard never fetches anything at view time. Run it after
# changing the version in server/admin/web/package.json (then npm install
# there to update the lock), and commit what it copies.
set -euo pipefail
web="$(cd "$(dirname "$0")/.." && pwd)/server/admin/web"
static="$web/../../../internal/uplot"
(cd "$web" && npm ci --no-audit --no-fund --loglevel=error >/dev/null)
version=$(node -p "require('$web/node_modules/uplot/package.json').version")
cp "$web/node_modules/uplot/dist/uPlot.iife.min.js" "$static/uplot.min.js"
cp "$web/node_modules/uplot/dist/uPlot.min.css" "$static/uplot.min.css"
cp "$web/node_modules/uplot/LICENSE" "$static/uplot.LICENSE"
echo "$version" >"$static/uplot.version"
echo "vendored uPlot $version into $static"
