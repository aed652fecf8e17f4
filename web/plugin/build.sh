#!/usr/bin/env bash
# Builds the OpenShift console plugin (web/plugin/dist, embedded by plugin.go) and the test host page
# (web/plugin/hosttest/dist) from web/plugin/src, with packages from the npm registry pinned in
# package-lock.json. `make generate` runs it; the output is committed and the same sources give the same files.
set -euo pipefail
cd "$(dirname "$0")/src"
command -v npm >/dev/null || { echo "build.sh: npm is missing (Debian package npm; make deps installs it)" >&2; exit 1; }
npm ci --no-audit --no-fund --loglevel=error >/dev/null
npx --no-install webpack --config webpack.config.js >/dev/null
npx --no-install webpack --config webpack.host.config.js >/dev/null
mkdir -p ../dist/locales/en
cp locales/en/plugin__lvms-console.json ../dist/locales/en/
