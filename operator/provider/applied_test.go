package provider

import "testing"

// TestAppliedMemo: an apply is skipped only for the same configuration on the version that apply produced;
// another configuration, a newer version (someone changed the object), an unknown version or a failed apply
// applies again.
func TestAppliedMemo(t *testing.T) {
	var m appliedMemo
	a, _ := fingerprint(map[string]string{"image": "lvms:1"})
	b, _ := fingerprint(map[string]string{"image": "lvms:2"})
	if m.current("DaemonSet/x", a, "10") {
		t.Error("nothing applied yet, yet current")
	}
	m.record("DaemonSet/x", a, "10")
	for _, tc := range []struct {
		name    string
		cfg     [32]byte
		version string
		want    bool
	}{
		{"same configuration, same version", a, "10", true},
		{"another configuration", b, "10", false},
		{"changed since", a, "11", false},
		{"version unknown (not in the cache)", a, "", false},
	} {
		if got := m.current("DaemonSet/x", tc.cfg, tc.version); got != tc.want {
			t.Errorf("%s: current = %v, want %v", tc.name, got, tc.want)
		}
	}
	if m.current("CSIDriver/x", a, "10") {
		t.Error("another object shares the entry")
	}
	m.record("DaemonSet/x", a, "") // a failed apply
	if m.current("DaemonSet/x", a, "10") {
		t.Error("still current after a failed apply")
	}
}
