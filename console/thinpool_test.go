package console

import (
	"strings"
	"testing"

	lvmv2 "github.com/lvms-dev/lvms/api/lvm/v2alpha1"
)

// TestThinPools_Thresholds: a pool's usage is judged against the thresholds its device class sets (as
// the node agent reports them), the defaults (90 % data, 75 % metadata) when the status has none: a
// warning from 10 points below, an error at the threshold, with the threshold in what is desired.
func TestThinPools_Thresholds(t *testing.T) {
	tests := []struct {
		name       string
		status     lvmv2.LogicalVolumeStatus
		wantHealth Health
		wantDesire string
		wantData   float64
	}{
		{"below a low threshold's margin", lvmv2.LogicalVolumeStatus{DataPercent: "49.9", MetadataPercent: "1", DataUsageThreshold: 60, MetadataUsageThreshold: 75}, HealthOK, "", 60},
		{"near a low threshold", lvmv2.LogicalVolumeStatus{DataPercent: "55", MetadataPercent: "1", DataUsageThreshold: 60, MetadataUsageThreshold: 75}, HealthWarning, "below 60% data", 60},
		{"at a low threshold", lvmv2.LogicalVolumeStatus{DataPercent: "60", MetadataPercent: "1", DataUsageThreshold: 60, MetadataUsageThreshold: 75}, HealthError, "below 60% data", 60},
		{"no thresholds reported: the defaults", lvmv2.LogicalVolumeStatus{DataPercent: "85", MetadataPercent: "1"}, HealthWarning, "below 90% data", 90},
		{"metadata at the default", lvmv2.LogicalVolumeStatus{DataPercent: "1", MetadataPercent: "75"}, HealthError, "below 75% metadata", 90},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tc.status.Name, tc.status.Attributes = "pool", "twi-aotz--"
			pools := thinPools("n1", &desiredVG{pools: []string{"pool"}}, &actualVG{name: "vg", state: "Healthy", volumes: []lvmv2.LogicalVolumeStatus{tc.status}})
			if len(pools) != 1 {
				t.Fatalf("pools %+v", pools)
			}
			p := pools[0]
			if p.Health != tc.wantHealth || p.DataThreshold != tc.wantData {
				t.Errorf("health %v, data threshold %v; want %v, %v", p.Health, p.DataThreshold, tc.wantHealth, tc.wantData)
			}
			if tc.wantDesire == "" && len(p.Findings) > 0 || tc.wantDesire != "" && (len(p.Findings) != 1 || !strings.HasPrefix(p.Findings[0].Desired, tc.wantDesire)) {
				t.Errorf("findings %+v, want one desiring %q", p.Findings, tc.wantDesire)
			}
		})
	}
}
