package lvmdapi

import (
	"context"
	"math"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/lvms-dev/lvms/nodeagent/lvmdapi/proto"
)

// TestThinAllowance: a thin class offers the smaller of what its ratio still allows and what the pool's
// real data leaves below its threshold, nothing once metadata reaches its threshold, and the ratio's
// figure alone when lvm2 does not say how full the pool is.
func TestThinAllowance(t *testing.T) {
	const pool = 100 * gib
	nan := math.NaN()
	tests := []struct {
		name string
		in   thinInput
		want uint64
	}{
		{"empty pool: the real room below the threshold, not ratio × pool",
			thinInput{Ratio: 10, PoolSize: pool, Data: 0, Metadata: 1, DataThreshold: 90, MetadataThreshold: 75}, 90 * gib},
		{"far over-provisioned but nearly empty: what the ratio has left",
			thinInput{Ratio: 10, PoolSize: pool, Virtual: 995 * gib, Data: 2, Metadata: 1, DataThreshold: 90, MetadataThreshold: 75}, 5 * gib},
		{"ratio used up exactly", thinInput{Ratio: 2, PoolSize: pool, Virtual: 200 * gib, Data: 0, Metadata: 1, DataThreshold: 90, MetadataThreshold: 75}, 0},
		{"promised more than the ratio allows (the ratio was lowered)",
			thinInput{Ratio: 2, PoolSize: pool, Virtual: 300 * gib, Data: 0, Metadata: 1, DataThreshold: 90, MetadataThreshold: 75}, 0},
		{"under-provisioned but nearly full of real data: the 2 % left below the threshold",
			thinInput{Ratio: 10, PoolSize: pool, Virtual: 95 * gib, Data: 88, Metadata: 10, DataThreshold: 90, MetadataThreshold: 75}, 2 * gib},
		{"data at its threshold", thinInput{Ratio: 10, PoolSize: pool, Data: 90, Metadata: 10, DataThreshold: 90, MetadataThreshold: 75}, 0},
		{"data past its threshold", thinInput{Ratio: 10, PoolSize: pool, Data: 97.5, Metadata: 10, DataThreshold: 90, MetadataThreshold: 75}, 0},
		{"metadata at its threshold, data empty", thinInput{Ratio: 10, PoolSize: pool, Data: 0, Metadata: 75, DataThreshold: 90, MetadataThreshold: 75}, 0},
		{"metadata just below its threshold", thinInput{Ratio: 10, PoolSize: pool, Data: 0, Metadata: 74.99, DataThreshold: 90, MetadataThreshold: 75}, 90 * gib},
		{"threshold 100: the whole pool", thinInput{Ratio: 10, PoolSize: pool, Data: 0, Metadata: 0, DataThreshold: 100, MetadataThreshold: 100}, 100 * gib},
		// lvm2 prints two decimals: used bytes round up and the threshold's bytes down, so the figure never
		// offers a byte the pool does not have.
		{"rounding: used rounds up, the threshold down",
			thinInput{Ratio: 10, PoolSize: 1000, Data: 33.33, Metadata: 0, DataThreshold: 66.67, MetadataThreshold: 75}, 666 - 334},
		{"fractional ratio rounds down", thinInput{Ratio: 1.5, PoolSize: 3, Virtual: 2, Data: 0, Metadata: 0, DataThreshold: 100, MetadataThreshold: 100}, 2},
		{"usage unknown (an inactive pool): the ratio's figure",
			thinInput{Ratio: 10, PoolSize: pool, Virtual: 100 * gib, Data: nan, Metadata: nan, DataThreshold: 90, MetadataThreshold: 75}, 900 * gib},
		{"only metadata known and full", thinInput{Ratio: 10, PoolSize: pool, Data: nan, Metadata: 80, DataThreshold: 90, MetadataThreshold: 75}, 0},
		{"empty pool of size 0", thinInput{Ratio: 10, PoolSize: 0, Data: 0, Metadata: 0, DataThreshold: 90, MetadataThreshold: 75}, 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := thinAllowance(tc.in); got != tc.want {
				t.Errorf("thinAllowance = %d, want %d", got, tc.want)
			}
		})
	}
}

func TestPoolPercent(t *testing.T) {
	for in, want := range map[string]float64{"30.00": 30, " 7.5 ": 7.5, "100.00": 100} {
		if got := poolPercent(in); got != want {
			t.Errorf("poolPercent(%q) = %v, want %v", in, got, want)
		}
	}
	for _, in := range []string{"", "  ", "abc", "-1", "Inf", "NaN", "12%"} {
		if got := poolPercent(in); !math.IsNaN(got) {
			t.Errorf("poolPercent(%q) = %v, want unknown (NaN)", in, got)
		}
	}
}

// TestServer_RefusesPastThreshold: a new thin volume, snapshot, clone or growth in a pool whose real data
// or metadata use is at its threshold is refused with ResourceExhausted naming the pool, its use, the
// threshold and what to do; the volumes already there are still listed, and once the pool has room again
// creating works.
func TestServer_RefusesPastThreshold(t *testing.T) {
	ctx := context.Background()
	c, sim := newTestServer(t)
	if _, err := c.CreateLV(ctx, &proto.CreateLVRequest{Name: "old", DeviceClass: "thin", SizeBytes: gib}); err != nil {
		t.Fatal(err)
	}
	for _, u := range []struct{ data, meta, kind, want string }{
		{"91.20", "10.00", "data", "past its data usage threshold (91.2% used, threshold 90%)"},
		{"10.00", "80.00", "metadata", "past its metadata usage threshold (80.0% used, threshold 75%)"},
	} {
		sim.SetPoolUsage("vg2", "pool0", u.data, u.meta)
		for name, call := range map[string]func() error{
			"create": func() error {
				_, err := c.CreateLV(ctx, &proto.CreateLVRequest{Name: "new", DeviceClass: "thin", SizeBytes: 4096})
				return err
			},
			"snapshot": func() error {
				_, err := c.CreateLVSnapshot(ctx, &proto.CreateLVSnapshotRequest{Name: "snap", SourceVolume: "old", DeviceClass: "thin", AccessType: "ro"})
				return err
			},
			"grow": func() error {
				_, err := c.ResizeLV(ctx, &proto.ResizeLVRequest{Name: "old", DeviceClass: "thin", SizeBytes: 2 * gib})
				return err
			},
		} {
			err := call()
			msg := status.Convert(err).Message()
			if status.Code(err) != codes.ResourceExhausted || !strings.Contains(msg, `thin pool vg2/pool0 of device class "thin" is `+u.want) ||
				!strings.Contains(msg, "existing volumes keep working") || !strings.Contains(msg, "extend the pool") ||
				!strings.Contains(msg, "raise the device class's "+u.kind+"UsageThreshold") {
				t.Errorf("%s with %s at its threshold: %v", name, u.kind, err)
			}
		}
		if free, err := c.GetFreeBytes(ctx, &proto.GetFreeBytesRequest{DeviceClass: "thin"}); err != nil || free.FreeBytes != 0 {
			t.Errorf("GetFreeBytes with %s at its threshold = %v, %v; want 0", u.kind, free, err)
		}
	}
	list, err := c.GetLVList(ctx, &proto.GetLVListRequest{DeviceClass: "thin"})
	if err != nil || len(list.Volumes) != 1 || list.Volumes[0].Name != "old" {
		t.Errorf("volumes after the refusals: %v, %v; want old only, untouched", list, err)
	}
	sim.SetPoolUsage("vg2", "pool0", "50.00", "10.00")
	if _, err := c.CreateLV(ctx, &proto.CreateLVRequest{Name: "new", DeviceClass: "thin", SizeBytes: gib}); err != nil {
		t.Errorf("create once the pool has room again: %v", err)
	}
}
