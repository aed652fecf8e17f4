# LVMS — one binary, one module. `make test` and `make run` set up everything they need on a fresh Debian
# machine (Debian packages, control-plane binaries built from Go modules and cached under $(LVMS_CACHE)).

SHELL := /usr/bin/env bash
.SHELLFLAGS := -euo pipefail -c

LVMS_CACHE ?= $(HOME)/.cache/lvms
export LVMS_CACHE
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
COMMIT ?= $(shell git rev-parse --short HEAD 2>/dev/null || echo unknown)
LDFLAGS := -X main.version=$(VERSION) -X main.commit=$(COMMIT)
BIN := bin/lvms
# Per test binary: e2e/node took 51 min beside e2e/sharedvm on the 2-core machine (2026-12-02), so 60 min was close.
# -ldflags=-w: test binaries without DWARF (stack traces keep their file:line) link in half the CPU time,
# and about 200 are linked per run.
GO_TEST_FLAGS ?= -count=1 -timeout 80m -ldflags=-w
# The packages whose tests boot VMs for minutes: make test runs them one after the other in a lane of their own
# (e2e/tools/test.sh), beside the other packages.
TEST_VM_PKGS ?= ./e2e/node ./sandbox ./e2e/sharedvm ./e2e/csivm ./nodeagent/transfer ./e2e/vm
# At most two VM tests of one package at once (e2e/sharedvm's and e2e/csivm's run in parallel): more only
# shared the two cores among more guests.
VM_TEST_FLAGS ?= -parallel 2
LOCAL_FLAGS ?=

.PHONY: all
all: build

.PHONY: build
build: ## Build bin/lvms.
	go build -ldflags "$(LDFLAGS)" -o $(BIN) ./cmd/lvms

# The image's binary: static (no libc in the image is needed for it), paths trimmed so builds reproduce.
.PHONY: build-static
build-static: ## Build bin/lvms-static, the binary the image carries.
	CGO_ENABLED=0 go build -trimpath -ldflags "-s -w $(LDFLAGS)" -o bin/lvms-static ./cmd/lvms

# The container image without a container engine (package image): Debian packages pinned in
# image/packages.lock (downloaded once into $(LVMS_CACHE)/debs) plus bin/lvms-static, as an OCI layout
# (bin/image/oci) and an oci-archive (bin/image/lvms.oci.tar). Times are the last commit's, so a build
# reproduces. Push with e.g. `skopeo copy oci-archive:bin/image/lvms.oci.tar docker://quay.io/you/lvms:tag`.
SOURCE_DATE_EPOCH ?= $(shell git log -1 --format=%ct 2>/dev/null || echo 0)
.PHONY: image
image: build-static ## Build the container image (bin/image): OCI layout and oci-archive.
	go run ./image/mkimage build --version $(VERSION) --revision $(COMMIT) --source-date-epoch $(SOURCE_DATE_EPOCH)

.PHONY: image-lock
image-lock: ## Re-pin image/packages.lock from image/packages.in to what the apt sources serve now.
	go run ./image/mkimage lock

# The OLM bundle (bundle/, generated from deploy/ by `make generate`) and its image: a scratch image with
# manifests/ and metadata/, labelled with the bundle annotations, in bin/bundle (OCI layout and oci-archive).
BUNDLE_VERSION ?= 0.1.0
.PHONY: bundle
bundle: ## Regenerate bundle/ and build the bundle image (bin/bundle).
	go run ./deploy/olm/mkbundle generate --version $(BUNDLE_VERSION)
	go run ./deploy/olm/mkbundle image --version $(BUNDLE_VERSION) --source-date-epoch $(SOURCE_DATE_EPOCH)

.PHONY: generate
generate: ## Regenerate deepcopy, CRDs, protobuf, templ, the console plugin (npm) and the OLM bundle.
	go tool controller-gen object paths=./api/...
	go tool controller-gen crd paths=./api/... output:crd:artifacts:config=deploy/crds
	sed -e 's/topolvm\.io/topolvm.cybozu.com/g' deploy/crds/topolvm.io_logicalvolumes.yaml \
		> deploy/crds/legacy/topolvm.cybozu.com_logicalvolumes.yaml
	protoc --plugin=protoc-gen-go=$$(go tool -n protoc-gen-go) --plugin=protoc-gen-go-grpc=$$(go tool -n protoc-gen-go-grpc) --go_out=. --go_opt=paths=source_relative --go-grpc_out=. --go-grpc_opt=paths=source_relative nodeagent/lvmdapi/proto/lvmd.proto
	go tool templ generate -path web
	web/plugin/build.sh
	go run ./deploy/olm/mkbundle generate --version $(BUNDLE_VERSION)

.PHONY: verify-generated
verify-generated: generate ## Fail when generated files are stale.
	@git diff --exit-code -- api deploy web nodeagent/lvmdapi bundle || { echo "generated files are stale: run 'make generate' and commit" >&2; exit 1; }

.PHONY: lint
lint: ## gofmt, go build (without the tests: a package must not need them to compile) and go vet.
	@out=$$(gofmt -l $$(git ls-files '*.go' | grep -v '_templ.go$$')); if [ -n "$$out" ]; then echo "gofmt needed: $$out" >&2; exit 1; fi
	go build ./...
	go vet ./...

# The fast tier, to run while working: lint, then every test that needs no root, no control plane, no VM and
# no browser. Under -short each tier's gate (testtier.Needs) skips its tests before starting anything, so
# nothing needs `make deps`; make test runs them all. The summary leaves those skips out (make test lists them)
# and the last line is the elapsed time.
CHECK_FLAGS ?= -count=1 -timeout 10m -ldflags=-w
.PHONY: check
check: ## The fast tier while working (2.5 min warm on 2 cores): lint, then go test -short (no root, control plane, VM or browser).
	@start=$$(date +%s); trap 'e=$$(( $$(date +%s) - start )); echo "make check: $$((e / 60)) min $$((e % 60)) s"' EXIT; \
	$(MAKE) --no-print-directory lint; \
	go tool gotestsum --format pkgname-and-test-fails --format-icons text --format-hide-empty-pkg --hide-summary skipped \
		-- -short $(CHECK_FLAGS) ./...

.PHONY: deps
deps: ## Install Debian packages and build the control plane (cached).
	e2e/tools/deps.sh

# make test fuzzes every target briefly (an iteration count: a short time limit trips Go's "context deadline
# exceeded" while the seed corpus warms up on a loaded machine); `make fuzz` runs them longer.
TEST_FUZZTIME ?= 20000x
FUZZTIME ?= 60s
.PHONY: fuzz
fuzz: ## Every Go fuzz target for FUZZTIME each.
	FUZZTIME=$(FUZZTIME) e2e/tools/fuzz.sh

# go test runs through gotestsum (a go tool): one line per package while it runs, and at the end a summary
# that lists every skipped test with its reason, every failure with its output, and the totals. Under CI=true a
# tier that cannot run fails (testtier), so CI's skips are only tests that do not apply on the host.
# e2e/tools/test.sh runs it in two lanes side by side: TEST_VM_PKGS one after the other, and the other packages one
# at a time followed by the benchmarks' smoke and the fuzz run (why: the script's header).
#
# make test times itself (e2e/testtimes): after the summary it writes the wall times of the go test phase and
# of each lane, the smoke, the fuzz run and the whole run (from TEST_START, when make started, before deps),
# every package's time and the ten slowest tests to $(TEST_TIMES) and the README's test-time section, then
# judges the run against TEST_BUDGET (warm runs on a 2-core machine only) and prints the verdict last: over the
# budget, make test fails, naming the packages that grew since the record committed at HEAD. A run is cold when
# deps built the control-plane or node binaries: a file under $(LVMS_CACHE)/controlplane or node newer than
# TEST_START (not counting the builders' .lock files and .tmp.* names).
TEST_START := $(shell date +%s)
TEST_TIMES := e2e/tools/test-times.json
# The issue's goal is 35 minutes; the suite does not fit it yet (its VM lane alone is longer under emulation),
# so the budget is what it holds today below CI's 90-minute limit, to be lowered as the suite shrinks.
TEST_BUDGET ?= 88m
# The benchmarks' smoke: every benchmark once at its smallest size (LVMS_BENCH_SMOKE=1, package benchsmoke: a
# few nodes and claims, no idle waits, only the simulated sandbox), so a benchmark that no longer completes fails
# make test with its reason instead of rotting until make bench; its figures mean nothing and are not kept. It is
# a go test of its own (-run '^$$': each package's TestMain, no tests) over the packages that have benchmarks:
# given -bench, cmd/go runs a go test's test binaries one after the other, the first only once every binary is
# built, so inside the tests' go test it made the whole suite serial. go test runs through
# e2e/testtimes/gotest, which adds the end events go test -json leaves out for benchmarks that pass (gotestsum
# would list each as a failure). BENCH_SMOKE_FLAGS= turns the smoke off; BENCH_SMOKE_SKIP names benchmarks to
# leave out (every benchmark chooses a smoke size; a skipped one would otherwise run at full size).
BENCH_SMOKE_FLAGS ?= -bench . -benchtime 1x
BENCH_SMOKE_SKIP ?=
.PHONY: test
test: deps image ## Everything CI runs: generated files, lint, all test tiers, the benchmarks' smoke, a short fuzz run; the summary and the test-time budget come last.
	@if [ "$${CI:-}" = "true" ]; then $(MAKE) --no-print-directory verify-generated; fi
	$(MAKE) --no-print-directory lint
	TEST_START=$(TEST_START) TEST_TIMES=$(TEST_TIMES) TEST_BUDGET=$(TEST_BUDGET) COMMIT=$(COMMIT) \
		GO_TEST_FLAGS='$(GO_TEST_FLAGS)' TEST_VM_PKGS='$(TEST_VM_PKGS)' VM_TEST_FLAGS='$(VM_TEST_FLAGS)' \
		BENCH_SMOKE_FLAGS='$(BENCH_SMOKE_FLAGS)' BENCH_SMOKE_SKIP='$(BENCH_SMOKE_SKIP)' TEST_FUZZTIME=$(TEST_FUZZTIME) \
		e2e/tools/test.sh

.PHONY: bench
bench: deps ## The performance figures (bench/figures.go): runs their benchmarks, writes bench/results.json and the README's table (BENCH_PKGS narrows it).
	KUBEBUILDER_ASSETS=$$(e2e/tools/build.sh) go run ./bench/run

# make bench-peer TOPOLVM_SRC=<a TopoLVM checkout> [SIDECARS_SRC=<a directory of kubernetes-csi sidecar checkouts>]:
# the node footprint side by side with TopoLVM in one run (e2e/footprint), its peer built from those sources
# (e2e/tools/build-peer.sh; nothing of them enters this repository); the figures go to bench/results.json.
.PHONY: bench-peer
bench-peer: deps ## LVMS's node footprint beside TopoLVM and its CSI sidecars built from TOPOLVM_SRC (and SIDECARS_SRC), in one run.
	@if [ -z "$(TOPOLVM_SRC)" ]; then echo "make bench-peer needs TOPOLVM_SRC=<a TopoLVM source checkout> (and SIDECARS_SRC=<a directory of kubernetes-csi sidecar checkouts> for its sidecars)" >&2; exit 2; fi
	peer=$$(e2e/tools/build-peer.sh "$(TOPOLVM_SRC)" "$(SIDECARS_SRC)") && \
	KUBEBUILDER_ASSETS=$$(e2e/tools/build.sh) TOPOLVM_BIN=$$peer BENCH_PKGS=./e2e/footprint go run ./bench/run

.PHONY: mutate
mutate: deps ## Mutation testing of the safety-critical code; prints each package's score (MUTATE_PKGS narrows it).
	KUBEBUILDER_ASSETS=$$(e2e/tools/build.sh) e2e/tools/mutate.sh

# The real-kernel lane alone: tests named TestVM... boot Debian's kernel under qemu (e2e/vm). Narrow it with
# VM_RUN and VM_PKGS, e.g. `make test-vm VM_RUN=TestVMSharedLock VM_PKGS=./e2e/vm/...`.
VM_PKGS ?= ./...
VM_RUN ?= ^TestVM
.PHONY: test-vm
test-vm: deps ## The real-kernel VM lane only (tests named TestVM*; VM_RUN, VM_PKGS narrow it).
	KUBEBUILDER_ASSETS=$$(e2e/tools/build.sh) go test $(GO_TEST_FLAGS) -v -run '$(VM_RUN)' $(VM_PKGS)

# The real-node tier alone (e2e/node): control plane on the host, kubelet + containerd in a VM of the lane, the
# product installed from deploy/ with the image from `make image`, the user's flows.
.PHONY: test-node
test-node: deps image ## The real-node tier only: kubelet + containerd in a VM, the product installed from deploy/.
	KUBEBUILDER_ASSETS=$$(e2e/tools/build.sh) go test $(GO_TEST_FLAGS) -v -run '^TestNode' ./e2e/node/

.PHONY: run
# LOCAL_FLAGS=--simulated runs the simulated sandbox instead (as root; no VM, no image).
run: build ## Run the local sandbox (lvms local): control plane, two real node VMs (kubelet, containerd), LVMS installed from deploy/, a demo pod writing to a volume; Ctrl-C cleans up.
	@if echo " $(LOCAL_FLAGS) " | grep -q -- ' --simulated '; then e2e/tools/deps.sh sandbox; else e2e/tools/deps.sh nodes && $(MAKE) --no-print-directory image; fi
	$(BIN) local $(LOCAL_FLAGS)

.PHONY: help
help:
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | sed 's/:.*## /\t/'
