// Package testtier decides what a test does when its tier cannot run on this machine (no qemu, no chromium,
// not root, ...): outside CI it skips with a message naming what is missing; under CI=true it fails with the
// same message, so a green CI run proves every tier.
//
// It imports only the standard library, so test helpers of every layer can use it.
package testtier

import (
	"os"
	"testing"
)

// InCI tells whether the tests run under CI (CI=true, as .ci/run sets it).
func InCI() bool { return os.Getenv("CI") == "true" }

// Unavailable ends the test because its tier cannot run here. missing says what is missing and how to get
// it (for example "qemu-system-x86_64 is not installed (Debian package qemu-system-x86)").
func Unavailable(t testing.TB, missing string) {
	t.Helper()
	if InCI() {
		t.Fatalf("CI=true: this test tier must run, but %s", missing)
		return
	}
	t.Skipf("%s (skipped outside CI; under CI=true this fails)", missing)
}

// Unavailablef is Unavailable with a format.
func Unavailablef(t testing.TB, format string, args ...any) {
	t.Helper()
	if InCI() {
		t.Fatalf("CI=true: this test tier must run, but "+format, args...)
		return
	}
	t.Skipf(format+" (skipped outside CI; under CI=true this fails)", args...)
}
