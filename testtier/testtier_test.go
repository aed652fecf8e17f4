package testtier

import (
	"flag"
	"fmt"
	"strings"
	"testing"
)

// recorder is a testing.TB that records how the test ended instead of ending it.
type recorder struct {
	testing.TB
	skipped, failed string
}

func (r *recorder) Helper()                           {}
func (r *recorder) Skipf(format string, args ...any)  { r.skipped = sprintf(format, args...) }
func (r *recorder) Fatalf(format string, args ...any) { r.failed = sprintf(format, args...) }

// setShort sets -test.short for the rest of the test, as `go test -short` (make check) does.
func setShort(t *testing.T, short bool) {
	f := flag.Lookup("test.short")
	was := f.Value.String()
	if err := f.Value.Set(fmt.Sprint(short)); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = f.Value.Set(was) })
}

func TestUnavailable_SkipsOutsideCIAndFailsInCI(t *testing.T) {
	setShort(t, false)
	for _, ci := range []string{"", "false", "true"} {
		t.Run("CI="+ci, func(t *testing.T) {
			t.Setenv("CI", ci)
			r := &recorder{TB: t}
			Unavailable(r, "chromium is not installed (Debian package chromium)")
			msg := r.skipped
			if ci == "true" {
				msg = r.failed
				if r.skipped != "" {
					t.Errorf("skipped under CI: %q", r.skipped)
				}
			} else if r.failed != "" {
				t.Errorf("failed outside CI: %q", r.failed)
			}
			if !strings.Contains(msg, "chromium is not installed (Debian package chromium)") {
				t.Errorf("message %q does not name what is missing", msg)
			}
		})
	}
}

// TestUnavailable_SkipsUnderShortEvenInCI: -short is the developer's choice of the fast tier, so a tier that
// cannot run skips there even under CI=true (make test, what CI runs, never passes -short).
func TestUnavailable_SkipsUnderShortEvenInCI(t *testing.T) {
	setShort(t, true)
	for _, ci := range []string{"", "true"} {
		t.Run("CI="+ci, func(t *testing.T) {
			t.Setenv("CI", ci)
			r := &recorder{TB: t}
			Unavailablef(r, "%s is not installed (Debian package %s)", "cpio", "cpio")
			if r.failed != "" {
				t.Errorf("failed under -short: %q", r.failed)
			}
			if !strings.Contains(r.skipped, "cpio is not installed (Debian package cpio)") || !strings.Contains(r.skipped, "-short") {
				t.Errorf("skip message %q does not name what is missing and why it skips", r.skipped)
			}
		})
	}
}

// TestNeeds_SkipsOnlyUnderShort: under -short (make check) a test that needs a tier skips, in CI or not, and
// says what it needs and which command runs it; without -short (make test) Needs lets it run.
func TestNeeds_SkipsOnlyUnderShort(t *testing.T) {
	for _, short := range []bool{false, true} {
		for _, ci := range []string{"", "true"} {
			t.Run(fmt.Sprintf("short=%v/CI=%s", short, ci), func(t *testing.T) {
				setShort(t, short)
				t.Setenv("CI", ci)
				r := &recorder{TB: t}
				Needs(r, "a control plane (kube-apiserver and etcd)")
				if r.failed != "" {
					t.Errorf("failed: %q", r.failed)
				}
				if !short {
					if r.skipped != "" {
						t.Errorf("skipped without -short: %q", r.skipped)
					}
					return
				}
				for _, want := range []string{"needs a control plane (kube-apiserver and etcd)", "make check", "-short", "make test runs it"} {
					if !strings.Contains(r.skipped, want) {
						t.Errorf("skip message %q does not say %q", r.skipped, want)
					}
				}
			})
		}
	}
}

func sprintf(format string, args ...any) string { return fmt.Sprintf(format, args...) }
