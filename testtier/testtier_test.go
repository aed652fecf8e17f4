package testtier

import (
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

func TestUnavailable_SkipsOutsideCIAndFailsInCI(t *testing.T) {
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

func sprintf(format string, args ...any) string { return fmt.Sprintf(format, args...) }
