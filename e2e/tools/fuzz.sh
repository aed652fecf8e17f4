#!/usr/bin/env bash
# Runs every Go fuzz target of the module for a short time each (FUZZTIME, default 10s; make test uses 20000x, make fuzz 60s): parsers of lsblk,
# wipefs, lvm and lvmd output, selectors, bundles, redaction, request sizes. New crashers land in the
# package's testdata/fuzz and fail the run.
set -euo pipefail
cd "$(dirname "$0")/../.."
fuzztime=${FUZZTIME:-10s}
status=0
while read -r dir name; do
  echo "fuzz ${dir} ${name} (${fuzztime})"
  if ! go test -ldflags=-w "./${dir}" -run '^$' -fuzz "^${name}\$" -fuzztime "$fuzztime" >/tmp/lvms-fuzz.$$ 2>&1; then
    cat /tmp/lvms-fuzz.$$; status=1
  fi
done < <(git grep -h -n -E '^func Fuzz[A-Za-z0-9_]*\(' -- '*_test.go' >/dev/null; \
  git grep -E '^func Fuzz[A-Za-z0-9_]*\(' -- '*_test.go' | sed -E 's#^(.*)/[^/]*_test\.go:func (Fuzz[A-Za-z0-9_]*)\(.*#\1 \2#' | sort -u)
rm -f /tmp/lvms-fuzz.$$
exit $status
