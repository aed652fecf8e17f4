package driver

import (
	"testing"

	topolvmv1 "github.com/lvms-dev/lvms/api/topolvm/v1"
)

func TestNames(t *testing.T) {
	tests := []struct {
		legacy bool
		want   map[string]string
	}{
		{false, map[string]string{
			"driver": "topolvm.io", "topology": "topology.topolvm.io/node", "capacity": "capacity.topolvm.io/ssd",
			"default": "capacity.topolvm.io/00default", "param": "topolvm.io/device-class", "option": "topolvm.io/lvcreate-option-class",
			"finalizer": "topolvm.io/logicalvolume", "node": "topolvm.io/node", "resize": "topolvm.io/resize-requested-at",
			"pending": "topolvm.io/pendingdeletion", "gv": "topolvm.io/v1"}},
		{true, map[string]string{
			"driver": "topolvm.cybozu.com", "topology": "topology.topolvm.cybozu.com/node", "capacity": "capacity.topolvm.cybozu.com/ssd",
			"default": "capacity.topolvm.cybozu.com/00default", "param": "topolvm.cybozu.com/device-class", "option": "topolvm.cybozu.com/lvcreate-option-class",
			"finalizer": "topolvm.cybozu.com/logicalvolume", "node": "topolvm.cybozu.com/node", "resize": "topolvm.cybozu.com/resize-requested-at",
			"pending": "topolvm.cybozu.com/pendingdeletion", "gv": "topolvm.cybozu.com/v1"}},
	}
	for _, tc := range tests {
		n := New(tc.legacy)
		got := map[string]string{
			"driver": n.Driver(), "topology": n.TopologyKey(), "capacity": n.CapacityAnnotation("ssd"), "default": n.CapacityAnnotation(""),
			"param": n.DeviceClassParam(), "option": n.OptionClassParam(), "finalizer": n.LogicalVolumeFinalizer(), "node": n.NodeFinalizer(),
			"resize": n.ResizeRequestedAt(), "pending": n.PendingDeletion(), "gv": n.GroupVersion().String(),
		}
		for k, v := range tc.want {
			if got[k] != v {
				t.Errorf("legacy=%v %s: %q, want %q", tc.legacy, k, got[k], v)
			}
		}
		if dc, ok := n.IsCapacityAnnotation(n.CapacityAnnotation("thin")); !ok || dc != "thin" {
			t.Errorf("legacy=%v: IsCapacityAnnotation = %q, %v", tc.legacy, dc, ok)
		}
		s, err := n.Scheme()
		if err != nil {
			t.Fatal(err)
		}
		gvks, _, err := s.ObjectKinds(&topolvmv1.LogicalVolume{})
		if err != nil || len(gvks) != 1 || gvks[0].Group != tc.want["driver"] {
			t.Errorf("legacy=%v: LogicalVolume maps to %v (%v), want exactly group %s", tc.legacy, gvks, err, tc.want["driver"])
		}
	}
	if (Names{}).Driver() != "topolvm.io" {
		t.Error("the zero Names must be the current group")
	}
}
