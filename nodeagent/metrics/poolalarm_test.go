package metrics_test

import (
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"k8s.io/client-go/tools/events"

	"github.com/lvms-dev/lvms/api/topolvm/driver"
	"github.com/lvms-dev/lvms/nodeagent/lvmd"
	"github.com/lvms-dev/lvms/nodeagent/lvmdapi"
	"github.com/lvms-dev/lvms/nodeagent/lvmdapi/proto"
	"github.com/lvms-dev/lvms/nodeagent/metrics"
)

func usage(data, meta float64) *proto.WatchResponse {
	return &proto.WatchResponse{Items: []*proto.WatchItem{{DeviceClass: "thin", SizeBytes: 2000,
		ThinPool: &proto.ThinPoolItem{DataPercent: data, MetadataPercent: meta, SizeBytes: 1500}}}}
}

func drain(rec *events.FakeRecorder) []string {
	var out []string
	for {
		select {
		case e := <-rec.Events:
			out = append(out, e)
		default:
			return out
		}
	}
}

// TestExporter_PoolEvents: as a pool fills, the node gets one ThinPoolNearlyFull warning 10 points below
// the threshold and one ThinPoolFull at it, whatever the number of Watch messages in between; a pool
// hovering at a boundary is not announced again until it fell clearly below it, and then rises again.
func TestExporter_PoolEvents(t *testing.T) {
	cfg := &lvmd.Config{DeviceClasses: []lvmd.DeviceClass{{Name: "thin", VolumeGroup: "vg", Type: lvmd.TypeThin,
		ThinPool: &lvmd.ThinPoolConfig{Name: "pool", OverprovisionRatio: 2, DataUsageThreshold: new(80.0)}}}}
	e := metrics.NewExporter(nil, nil, "n1", driver.New(false))
	rec := events.NewFakeRecorder(100)
	e.Config, e.Events = lvmdapi.StaticConfig(cfg), rec
	steps := []struct {
		data, meta float64
		want       []string
	}{
		{10, 1, nil},
		{69.9, 1, nil},
		{70, 1, []string{"Warning ThinPoolNearlyFull node n1: thin pool vg/pool (device class \"thin\") is nearly at its data usage threshold: 70.0% used, threshold 80%."}},
		{75, 1, nil},
		{68.5, 1, nil}, // within the hysteresis band: still nearly full
		{72, 1, nil},
		{80, 1, []string{"Warning ThinPoolFull node n1: thin pool vg/pool (device class \"thin\") is past its data usage threshold: 80.0% used, threshold 80%. New volumes are refused on it; existing volumes keep working."}},
		{95, 1, nil},
		{79, 1, nil},
		{77, 1, nil}, // left full, still nearly full: no event for falling
		{60, 1, nil}, // OK again
		{100, 1, []string{"Warning ThinPoolFull"}},
		{100, 75, []string{"Warning ThinPoolFull node n1: thin pool vg/pool (device class \"thin\") is past its metadata usage threshold: 75.0% used, threshold 75%."}},
	}
	for i, s := range steps {
		e.Observe(usage(s.data, s.meta))
		got := drain(rec)
		if len(got) != len(s.want) {
			t.Fatalf("step %d (data %v%%, metadata %v%%): events %q, want %d", i, s.data, s.meta, got, len(s.want))
		}
		for j, w := range s.want {
			if !strings.HasPrefix(got[j], w) {
				t.Errorf("step %d: event %q\nwant it to start with %q", i, got[j], w)
			}
			if !strings.Contains(got[j], "Extend the pool") || !strings.Contains(got[j], "UsageThreshold") {
				t.Errorf("step %d: event %q does not say what to do", i, got[j])
			}
		}
	}
}

// TestExporter_ThresholdMetrics: the thresholds are exported beside the usage, from lvmd.yaml or the
// defaults when it has none (TopoLVM's files, a remote lvmd).
func TestExporter_ThresholdMetrics(t *testing.T) {
	for _, tc := range []struct {
		name       string
		config     lvmdapi.ConfigFunc
		data, meta string
	}{
		{"set in lvmd.yaml", lvmdapi.StaticConfig(&lvmd.Config{DeviceClasses: []lvmd.DeviceClass{{Name: "thin", VolumeGroup: "vg", Type: lvmd.TypeThin,
			ThinPool: &lvmd.ThinPoolConfig{Name: "pool", OverprovisionRatio: 2, DataUsageThreshold: new(85.0), MetadataUsageThreshold: new(60.0)}}}}), "85", "60"},
		{"defaults", nil, "90", "75"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := metrics.NewExporter(nil, nil, "n1", driver.New(false))
			e.Config = tc.config
			reg := prometheus.NewRegistry()
			if err := e.Register(reg); err != nil {
				t.Fatal(err)
			}
			e.Observe(usage(12.5, 3))
			want := `
# HELP lvms_thinpool_data_usage_threshold_percent Thin pool data usage percent at which no new volume is placed on the pool
# TYPE lvms_thinpool_data_usage_threshold_percent gauge
lvms_thinpool_data_usage_threshold_percent{device_class="thin",node="n1"} ` + tc.data + `
# HELP lvms_thinpool_metadata_usage_threshold_percent Thin pool metadata usage percent at which no new volume is placed on the pool
# TYPE lvms_thinpool_metadata_usage_threshold_percent gauge
lvms_thinpool_metadata_usage_threshold_percent{device_class="thin",node="n1"} ` + tc.meta + `
`
			if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "lvms_thinpool_data_usage_threshold_percent", "lvms_thinpool_metadata_usage_threshold_percent"); err != nil {
				t.Error(err)
			}
		})
	}
}
