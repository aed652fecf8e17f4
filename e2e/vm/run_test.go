package vm

import (
	"slices"
	"testing"
	"time"
)

func TestTestRunPattern(t *testing.T) {
	for in, want := range map[string]string{
		"TestVMLocalLVM":        "^TestVMLocalLVM$",
		"TestVMX/thin_pool":     "^TestVMX$/^thin_pool$",
		"TestVMX/a.b(c)":        `^TestVMX$/^a\.b\(c\)$`,
		"TestVMX/sub/subsub#01": "^TestVMX$/^sub$/^subsub#01$",
	} {
		if got := testRunPattern(in); got != want {
			t.Errorf("testRunPattern(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestTestArgs(t *testing.T) {
	got := testArgs("^TestVMA$", 10*time.Minute)
	want := []string{"-test.run", "^TestVMA$", "-test.v", "-test.count=1", "-test.timeout", "9m40s"}
	if !slices.Equal(got, want) {
		t.Errorf("testArgs = %q, want %q", got, want)
	}
	if got := testArgs("x", 20*time.Second); got[len(got)-1] != "10s" {
		t.Errorf("short timeout: guest timeout %s, want half of it", got[len(got)-1])
	}
}

func TestGuestVerdict(t *testing.T) {
	const name = "TestVMX"
	pass := "=== RUN   TestVMX\n--- PASS: TestVMX (1.00s)\nPASS\n"
	for _, tc := range []struct {
		console string
		code    int
		want    string
	}{
		{pass, 0, ""},
		{pass, 1, "the guest test failed (exit code 1, see its log above)"},
		{"=== RUN   TestVMX\n--- SKIP: TestVMX (0.00s)\n", 0, verdictSkip},
		{"testing: warning: no tests to run\nPASS\n", 0, `the guest did not run TestVMX (no "--- PASS: TestVMX" line in its output)`},
		{"--- PASS: TestVMXY (1.00s)\n", 0, `the guest did not run TestVMX (no "--- PASS: TestVMX" line in its output)`},
	} {
		if got := guestVerdict(tc.console, name, tc.code); got != tc.want {
			t.Errorf("guestVerdict(%q, %d) = %q, want %q", tc.console, tc.code, got, tc.want)
		}
	}
	if got := guestVerdict("    --- PASS: TestVMX/sub (1.00s)\n", "TestVMX/sub", 0); got != "" {
		t.Errorf("subtest: %q", got)
	}
}
