#!/usr/bin/env bash
# make test's test phase, after deps, image and lint: every test in two lanes side by side, the benchmarks'
# smoke, a short fuzz run, the summary, and the test-time record judged against the budget.
#
# The lanes: under emulation the VM packages are bound by their guests' CPU, and two of them at once only
# slowed each other (a guest's periodic work, kubelet's and containerd's among it, grows with its wall time):
# at 8d8cf59 e2e/node beside sandbox took 55 and 36 minutes, against 24 and 16 with lighter neighbours, and
# the machine did 140 core-minutes of work for what took 79. So the VM packages (TEST_VM_PKGS) run one after the
# other in one lane (-p 1), and the other lane runs everything else one package at a time, then the
# benchmarks' smoke (a go test of its own: given -bench, cmd/go runs a go test's test binaries one after the
# other), then the fuzz targets: the second lane is done long before the first. The VM lane is the run's
# critical path, so the other lane runs at a lower priority (nice 5): it takes the CPU the guests leave.
#
# Environment (the Makefile's): TEST_START (make's start, epoch seconds), TEST_TIMES, TEST_BUDGET, COMMIT,
# LVMS_CACHE, GO_TEST_FLAGS, TEST_VM_PKGS, VM_TEST_FLAGS, BENCH_SMOKE_FLAGS (empty: no smoke), BENCH_SMOKE_SKIP,
# TEST_FUZZTIME.
set -uo pipefail
cd "$(dirname "$0")/../.."

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
status=0
cache=warm
[ -z "$(find "$LVMS_CACHE/controlplane" "$LVMS_CACHE/node" -name '.*' -prune -o -type f -newermt "@$TEST_START" -print -quit 2>/dev/null)" ] || cache=cold
commit=$COMMIT$(git diff --quiet HEAD -- . ':!README.md' ":!$TEST_TIMES" 2>/dev/null || echo -dirty)
git show "HEAD:$TEST_TIMES" >"$tmp/previous.json" 2>/dev/null || : >"$tmp/previous.json"
go build -o "$tmp/gotest" ./e2e/testtimes/gotest || exit 1
KUBEBUILDER_ASSETS=$(e2e/tools/build.sh) || exit 1
export KUBEBUILDER_ASSETS

gotestsum() {
	go tool gotestsum --format pkgname-and-test-fails --format-icons text --format-hide-empty-pkg --hide-summary all "$@"
}
read -r -a vm_pkgs <<<"$TEST_VM_PKGS"
module=$(go list -m)
mapfile -t other_pkgs < <(go list ./... | grep -v -x -F -f <(printf '%s\n' "${vm_pkgs[@]}" | sed "s|^\./|$module/|; s|^\.\$|$module|"))
read -r -a flags <<<"$GO_TEST_FLAGS"
read -r -a vm_flags <<<"$VM_TEST_FLAGS"

low=(nice -n 5) # the other lane's priority
t1=$(date +%s)
cpu1=$(head -1 /proc/stat)
(
	gotestsum --jsonfile "$tmp/vm.json" --raw-command -- "$tmp/gotest" "${flags[@]}" "${vm_flags[@]}" -p 1 "${vm_pkgs[@]}"
	echo $? >"$tmp/vm.status"
	date +%s >"$tmp/vm.end"
) &
vm_lane=$!

gotestsum --jsonfile "$tmp/other.json" --raw-command -- "${low[@]}" "$tmp/gotest" "${flags[@]}" -p 1 "${other_pkgs[@]}" || status=1
t_other=$(date +%s)

smoke=off
: >"$tmp/smoke.json"
t_smoke=$t_other
if [ -n "$BENCH_SMOKE_FLAGS" ]; then
	read -r -a smoke_flags <<<"$BENCH_SMOKE_FLAGS"
	mapfile -t smoke_pkgs < <(git grep -l -E '^func Benchmark' -- '*_test.go' | xargs -n1 dirname | sort -u | sed 's|^|./|')
	smoke=ok
	LVMS_BENCH_SMOKE=1 gotestsum --jsonfile "$tmp/smoke.json" --raw-command -- "${low[@]}" "$tmp/gotest" "${flags[@]}" -p 1 -run '^$' \
		"${smoke_flags[@]}" -skip "$BENCH_SMOKE_SKIP" "${smoke_pkgs[@]}" || { status=1; smoke=FAILED; }
	t_smoke=$(date +%s)
fi

fuzz=ok
FUZZTIME=$TEST_FUZZTIME "${low[@]}" e2e/tools/fuzz.sh || { status=1; fuzz=FAILED; }
t_fuzz=$(date +%s)

wait "$vm_lane"
[ "$(cat "$tmp/vm.status" 2>/dev/null)" = 0 ] || status=1
t_vm=$(cat "$tmp/vm.end" 2>/dev/null || date +%s)
cpu2=$(head -1 /proc/stat)
t2=$(( t_vm > t_other ? t_vm : t_other ))

cat "$tmp/vm.json" "$tmp/other.json" >"$tmp/tests.json"
echo "---- make test summary (benchmarks' smoke: $smoke; fuzz: $fuzz) ----"
go tool gotestsum --format pkgname --format-icons text --format-hide-empty-pkg --raw-command -- cat "$tmp/tests.json" "$tmp/smoke.json" || status=1
go run ./e2e/testtimes/run -json "$tmp/tests.json" -previous "$tmp/previous.json" -commit "$commit" \
	-start "$(date -u -d "@$TEST_START" +%Y-%m-%dT%H:%M:%SZ)" -cache "$cache" -go-test-flags "$GO_TEST_FLAGS" \
	-vm-lane-flags "$VM_TEST_FLAGS -p 1 $TEST_VM_PKGS" \
	-go-test "$(( t2 - t1 ))s" -vm-lane "$(( t_vm - t1 ))s" -other-lane "$(( t_other - t1 ))s" \
	-cpu-before "$cpu1" -cpu-after "$cpu2" \
	-bench-smoke "$(( t_smoke - t_other ))s" -bench-smoke-result "$smoke" \
	-fuzz "$(( t_fuzz - t_smoke ))s" -fuzz-time "$TEST_FUZZTIME" -fuzz-result "$fuzz" \
	-whole "$(( $(date +%s) - TEST_START ))s" -budget "$TEST_BUDGET" || status=1
exit $status
