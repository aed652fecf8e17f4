package testenv

import (
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/lvms-dev/lvms/testtier"
)

// TestBuildLVMS_LinksOnlyWhatChangedAndGivesEachItsOwnCopy: once BuildLVMS built the binary, building it
// again from unchanged sources links nothing (go build -x runs no linker) and leaves the same file in
// place; each caller gets a copy of its own, which runs.
func TestBuildLVMS_LinksOnlyWhatChangedAndGivesEachItsOwnCopy(t *testing.T) {
	testtier.Needs(t, "the Go toolchain to build lvms")
	first := BuildLVMS(t)
	built, err := lvmsBuilt()
	if err != nil {
		t.Fatal(err)
	}
	before, err := os.Stat(built)
	if err != nil {
		t.Fatal(err)
	}
	out, err := buildCommand(built, "-x").CombinedOutput()
	if err != nil {
		t.Fatalf("go build -x: %v: %s", err, out)
	}
	if strings.Contains(string(out), "/link ") {
		t.Errorf("building unchanged sources into %s linked again:\n%s", built, out)
	}
	second := BuildLVMS(t)
	if after, err := os.Stat(built); err != nil || !os.SameFile(before, after) {
		t.Errorf("%s was replaced by a build of unchanged sources (%v)", built, err)
	}
	if first == second {
		t.Fatalf("both builds returned %s: each caller gets its own copy", first)
	}
	for _, bin := range []string{first, second} {
		out, err := exec.Command(bin, "version").CombinedOutput()
		if err != nil || !strings.HasPrefix(string(out), "lvms ") {
			t.Errorf("%s version: %v: %s", bin, err, out)
		}
	}
}
