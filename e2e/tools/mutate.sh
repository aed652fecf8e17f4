#!/usr/bin/env bash
# Mutation testing of the safety-critical code (make mutate): gremlins changes one condition, operator or
# loop control at a time in the files listed below and runs the package's tests; a mutant no test notices
# "lived". Prints each package's score (killed / (killed + lived)) and fails when a lived mutant is not
# listed, with the reason it is harmless, in e2e/tools/mutate-survivors.txt.
# Each measured package's row (counts, score, survivors and their reasons, the commit measured at and its
# date) replaces its previous row in e2e/tools/mutate-scores.json, and the README's table is written from
# that file. MUTATE_PKGS narrows the run to some packages of the list, e.g. MUTATE_PKGS="operator/usage
# nodeagent/filter"; the other rows are kept. MUTATE_PKGS=none measures nothing: it rewrites the table, with the reasons
# given in the survivors file since a measurement filled in.
# MUTATE_FILES (with one package in MUTATE_PKGS) measures some of its files only, a part: a package too slow
# for one sitting is measured in parts, even at different commits, and its row sums them once every file is
# measured at one tree of the package's directory (a change to the package drops the parts measured before).
set -euo pipefail
cd "$(dirname "$0")/../.."

# package; files mutated (the rest of the package is left alone); go test flags for each mutant's run;
# gremlins flags. A mutant's run times out at --timeout-coefficient (3) times the package's first test run,
# which for a package whose tests take a second or two is less than building the mutated test binary on a
# busy machine: those get a larger coefficient, so that a timeout means a mutant that hangs.
# The VM lane is skipped under mutation: its scenarios are replayed from recordings by host tests. The
# provisioner's suite runs once per API group; under mutation only topolvm.io's (the code is the same, the
# names differ), which halves its time.
targets=(
  "operator/usage;          usage.go;"
  "nodeagent/filter;        filter.go filters.go;"
  "nodeagent/volumegroup;   wipe.go delete.go;                                  -skip=^TestVM"
  "nodeagent/lvm;           owner.go errors.go;                                 -skip=^TestVM"
  "nodeagent/lvmdapi;       server.go;"
  "operator/provisioner;    claim_controller.go resize.go volume_controller.go;     -skip=^TestProvisioner$/^legacy"
  "diagnostics/redact;      redact.go;"
  "diagnostics/bundle;      reader.go writer.go;"
  "nodeagent/diagnostics;   auth.go;"
  "console/live;            access.go pool.go;"
  "operator/transferca;     ca.go signer.go;"
  "operator/csicontroller;  controller.go shared.go groupsnapshot.go logicalvolumes.go expand.go size.go snapshot.go nodes.go lock.go;  ; --timeout-coefficient 10"
  "nodeagent/shared/hostid;    hostid.go;"
  "nodeagent/shared/vginit;    vginit.go;"
  "nodeagent/shared/lockspace; lockspace.go lv.go;                           ; --timeout-coefficient 10"
  "operator/noderemoval;    noderemoval_controller.go;                          ; --timeout-coefficient 10"
  "operator/admission;      guard.go policy.go;"
  "nodeagent/movefence;     fence.go;"
  "operator/move;           steps.go reconciler.go request.go preflight.go record.go controller.go;"
  "nodeagent/csinode;       node.go fence.go hostexec.go stats.go identity.go registrar.go;  ; --timeout-coefficient 10"
  "nodeagent/blockcopy;     frame.go receiver.go sender.go stream.go tls.go progress.go request.go;"
  "nodeagent/transfer;      runner.go controller.go instruction.go;             -skip=^TestVM; --timeout-coefficient 10"
)
survivors=e2e/tools/mutate-survivors.txt
scores=e2e/tools/mutate-scores.json

# A test binary gremlins kills at its timeout leaves its envtest etcd and kube-apiserver running, orphaned
# (parent PID 1), and every later mutant runs beside them: reap the orphans while gremlins runs.
reap_envtest() {
  [ -n "${KUBEBUILDER_ASSETS:-}" ] || return 0
  for pid in $(pgrep -f "^${KUBEBUILDER_ASSETS}/(etcd|kube-apiserver) " || true); do
    if [ "$(ps -o ppid= -p "$pid" | tr -d ' ')" = 1 ]; then kill -9 "$pid" 2>/dev/null || true; fi # orphans: no graceful shutdown needed, and kube-apiserver takes its time on SIGTERM
  done
}
( while sleep 20; do reap_envtest; done ) &
reaper=$!
trap 'kill $reaper 2>/dev/null; reap_envtest' EXIT
out=${MUTATE_OUT:-bin/mutate}
mkdir -p "$out"
report="$out/mutatereport"
go build -o "$report" ./e2e/mutatereport
status=0
summary=()
for t in "${targets[@]}"; do
  IFS=';' read -r pkg files flags gflags <<<"$t"
  pkg=$(echo $pkg) files=$(echo $files) flags=$(echo $flags) gflags=$(echo ${gflags:-})
  if [ -n "${MUTATE_PKGS:-}" ] && [[ " $MUTATE_PKGS " != *" $pkg "* ]]; then continue; fi
  mutated=$files
  if [ -n "${MUTATE_FILES:-}" ]; then
    if [ "$(echo $MUTATE_PKGS | wc -w)" != 1 ]; then echo "MUTATE_FILES needs exactly one package in MUTATE_PKGS" >&2; exit 2; fi
    for f in $MUTATE_FILES; do
      if [[ " $files " != *" $f "* ]]; then echo "MUTATE_FILES: $f is not among $pkg's mutated files ($files)" >&2; exit 2; fi
    done
    mutated=$(echo $MUTATE_FILES)
  fi
  # gremlins matches these against paths relative to the package, and walks sub-packages too: skip those.
  excludes=(-E /)
  for f in "$pkg"/*.go; do
    base=$(basename "$f")
    [[ $base == *_test.go ]] && continue
    [[ " $mutated " == *" $base "* ]] && continue
    excludes+=(-E "^${base//./\\.}\$")
  done
  json="$out/$(echo "$pkg" | tr / _).json"
  echo "mutate $pkg ($mutated)"
  # The commit measured at, taken before the run (others may commit meanwhile); "-dirty" when the package's
  # directory differs from it, so a row never claims a commit it was not measured at.
  head=$(git rev-parse --short HEAD)
  commit=$head tree=$(git rev-parse "$head:$pkg")
  if [ -n "$(git status --porcelain -- "$pkg")" ]; then commit="$head-dirty" tree=""; fi
  date=$(git log -1 --format=%cs "$head")
  # One worker: several packages' tests use loop devices and fixed names that parallel runs would share.
  # -count=1: gremlins times each mutant against its coverage run, which go test would otherwise answer from
  # its cache after an earlier run of the same package (in a second: every mutant then "times out").
  GOFLAGS="${GOFLAGS:-} -count=1 $flags" go tool gremlins unleash "./$pkg" --workers 1 --invert-logical --invert-loopctrl --timeout-coefficient 3 $gflags \
    "${excludes[@]}" -o "$json" -S lt >"$out/$(echo "$pkg" | tr / _).log" 2>&1 || true
  if [ ! -s "$json" ]; then
    echo "  gremlins wrote no result for $pkg; see $out/$(echo "$pkg" | tr / _).log"; status=1; continue
  fi
  part=()
  if [ -n "${MUTATE_FILES:-}" ]; then part=(-all-files "$files"); fi
  line=$("$report" -pkg "$pkg" -files "$mutated" "${part[@]}" -tree "$tree" -survivors "$survivors" -scores "$scores" -commit "$commit" -date "$date" "$json") || status=1
  summary+=("$line")
done
"$report" -scores "$scores" -survivors "$survivors" -readme README.md || status=1
if [ ${#summary[@]} -eq 0 ]; then echo "no package measured; README's table written from $scores"; exit $status; fi
echo "---- mutation scores (killed / (killed + lived); goal 90%) ----"
printf '%s\n' "${summary[@]}"
exit $status
