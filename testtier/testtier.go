// Package testtier decides what a test does when its tier cannot run on this machine (no qemu, no chromium,
// not root, ...): outside CI it skips with a message naming what is missing; under CI=true it fails with the
// same message, so a green CI run proves every tier.
//
// Under -short (make check, the fast tier run while working) a test that needs more than the bare host skips
// through Needs before it starts anything: a control plane, the VM lane, a browser, root. -short is a
// deliberate choice by the developer, so these skips, and Unavailable's, stay skips even under CI=true; make
// test never passes -short, so CI still runs, or fails, every tier.
//
// It imports only the standard library, so test helpers of every layer can use it.
package testtier

import (
	"fmt"
	"os"
	"testing"
)

// InCI tells whether the tests run under CI (CI=true, as .ci/run sets it).
func InCI() bool { return os.Getenv("CI") == "true" }

// Needs ends the test under -short: it needs what (for example "a control plane (kube-apiserver and
// etcd)"), which make check's fast tier does not start. Without -short it does nothing. Call it before the
// test starts anything of that tier.
func Needs(t testing.TB, what string) {
	t.Helper()
	if testing.Short() {
		t.Skipf("needs %s: not in make check's fast tier (-short); make test runs it", what)
	}
}

// Unavailable ends the test because its tier cannot run here. missing says what is missing and how to get
// it (for example "qemu-system-x86_64 is not installed (Debian package qemu-system-x86)").
func Unavailable(t testing.TB, missing string) {
	t.Helper()
	switch {
	case testing.Short():
		t.Skipf("%s (skipped under -short even under CI=true; make test under CI=true fails on it)", missing)
	case InCI():
		t.Fatalf("CI=true: this test tier must run, but %s", missing)
	default:
		t.Skipf("%s (skipped outside CI; under CI=true this fails)", missing)
	}
}

// Unavailablef is Unavailable with a format.
func Unavailablef(t testing.TB, format string, args ...any) {
	t.Helper()
	Unavailable(t, fmt.Sprintf(format, args...))
}
