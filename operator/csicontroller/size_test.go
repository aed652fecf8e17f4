package csicontroller

import (
	"testing"

	"github.com/container-storage-interface/spec/lib/go/csi"
)

func TestRequestSize(t *testing.T) {
	const mi = 1 << 20
	tests := []struct {
		name                     string
		required, limit, minimum int64
		want                     int64
		wantErr                  bool
	}{
		{name: "nothing asked: 1 GiB", want: gib},
		{name: "only a limit above 1 GiB", limit: 2 * gib, want: gib},
		{name: "only a limit below 1 GiB: the limit, rounded down", limit: 100*mi + 5, want: 100 * mi},
		{name: "limit below one sector", limit: 100, wantErr: true},
		{name: "rounded up to 4096", required: 4097, want: 8192},
		{name: "minimum applies", required: 1, minimum: 300 * mi, want: 300 * mi},
		{name: "minimum above the limit is not forced", required: 1, limit: 8192, minimum: 300 * mi, want: 4096},
		{name: "rounding beyond the limit", required: 4097, limit: 5000, wantErr: true},
		{name: "required above limit", required: 2, limit: 1, wantErr: true},
		{name: "required equal to the limit", required: 8192, limit: 8192, want: 8192},
		{name: "rounded up to the limit", required: 4097, limit: 8192, want: 8192},
		{name: "minimum equal to the limit applies", required: 1, limit: 300 * mi, minimum: 300 * mi, want: 300 * mi},
		{name: "the largest size that rounds without overflow", required: 1<<63 - 1 - 4096, want: 1<<63 - 4096},
		{name: "negative required", required: -1, wantErr: true},
		{name: "negative limit", limit: -1, wantErr: true},
		{name: "overflow", required: 1<<63 - 1, wantErr: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := requestSize(tc.required, tc.limit, tc.minimum)
			if (err != nil) != tc.wantErr || (!tc.wantErr && got != tc.want) {
				t.Fatalf("requestSize(%d, %d, %d) = %d, %v; want %d (error %v)", tc.required, tc.limit, tc.minimum, got, err, tc.want, tc.wantErr)
			}
		})
	}
}

func FuzzRequestSize(f *testing.F) {
	f.Add(int64(0), int64(0), int64(0))
	f.Add(int64(4097), int64(1<<30), int64(300<<20))
	f.Add(int64(1<<63-1), int64(0), int64(0))
	f.Fuzz(func(t *testing.T, required, limit, minimum int64) {
		got, err := requestSize(required, limit, minimum)
		if err != nil {
			return
		}
		if got <= 0 || got%4096 != 0 || (limit > 0 && got > limit) || got < required {
			t.Fatalf("requestSize(%d, %d, %d) = %d: not a positive multiple of 4096 within [required, limit]", required, limit, minimum, got)
		}
	})
}

func TestMinimumAllocation(t *testing.T) {
	m := DefaultMinimumAllocation()
	mount := func(fs string) *csi.VolumeCapability {
		return &csi.VolumeCapability{AccessType: &csi.VolumeCapability_Mount{Mount: &csi.VolumeCapability_MountVolume{FsType: fs}}}
	}
	block := &csi.VolumeCapability{AccessType: &csi.VolumeCapability_Block{Block: &csi.VolumeCapability_BlockVolume{}}}
	for _, tc := range []struct {
		caps []*csi.VolumeCapability
		want int64
	}{
		{[]*csi.VolumeCapability{block}, 8 << 20},
		{[]*csi.VolumeCapability{mount("")}, 32 << 20},
		{[]*csi.VolumeCapability{mount("ext4")}, 32 << 20},
		{[]*csi.VolumeCapability{mount("xfs")}, 300 << 20},
		{[]*csi.VolumeCapability{mount("btrfs")}, 200 << 20},
		{[]*csi.VolumeCapability{block, mount("xfs")}, 300 << 20},
	} {
		if got := m.For(tc.caps); got != tc.want {
			t.Errorf("For(%v) = %d, want %d", tc.caps, got, tc.want)
		}
	}
}
