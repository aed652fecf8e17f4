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
# webpack's compilation hash (the manifest's buildHash) depends on the checkout's absolute path: derive it from
# the emitted JavaScript instead, so every checkout builds the same manifest.
node -e '
const fs = require("fs"), crypto = require("crypto"), dir = "../dist";
const h = crypto.createHash("sha256");
for (const f of fs.readdirSync(dir).filter((f) => f.endsWith(".js")).sort()) { h.update(f); h.update(fs.readFileSync(dir + "/" + f)); }
const m = JSON.parse(fs.readFileSync(dir + "/plugin-manifest.json", "utf8"));
m.buildHash = h.digest("hex").slice(0, 16);
fs.writeFileSync(dir + "/plugin-manifest.json", JSON.stringify(m));
'
mkdir -p ../dist/locales/en
cp locales/en/plugin__lvms-console.json ../dist/locales/en/
