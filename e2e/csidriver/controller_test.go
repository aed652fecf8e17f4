package csidriver_test

import (
	"context"
	"math"
	"testing"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/lvms-dev/lvms/api/topolvm/driver"
	"github.com/lvms-dev/lvms/e2e/csidriver"
	"github.com/lvms-dev/lvms/e2e/testenv"
)

func capability(fs string, mode csi.VolumeCapability_AccessMode_Mode) *csi.VolumeCapability {
	c := &csi.VolumeCapability{AccessMode: &csi.VolumeCapability_AccessMode{Mode: mode}}
	if fs == "block" {
		c.AccessType = &csi.VolumeCapability_Block{Block: &csi.VolumeCapability_BlockVolume{}}
	} else {
		c.AccessType = &csi.VolumeCapability_Mount{Mount: &csi.VolumeCapability_MountVolume{FsType: fs}}
	}
	return c
}

// TestController_CreateVolume checks TopoLVM's size rules and error codes on bad input, on a real API
// server with two simulated nodes.
func TestController_CreateVolume(t *testing.T) {
	testenv.Require(t)
	names := driver.New(false)
	d := csidriver.Start(t, env.Config, csidriver.Options{Names: names, Nodes: []string{"ctl-a", "ctl-b"}})
	ctx := context.Background()
	rwo := csi.VolumeCapability_AccessMode_SINGLE_NODE_WRITER
	on := func(node string) *csi.TopologyRequirement {
		return &csi.TopologyRequirement{Requisite: []*csi.Topology{{Segments: map[string]string{names.TopologyKey(): node}}}}
	}
	dc := func(c string) map[string]string { return map[string]string{names.DeviceClassParam(): c} }
	caps := func(c ...*csi.VolumeCapability) []*csi.VolumeCapability { return c }

	thin, err := d.Controller.CreateVolume(ctx, &csi.CreateVolumeRequest{Name: "ctl-thin-src", VolumeCapabilities: caps(capability("ext4", rwo)),
		Parameters: dc("thin"), AccessibilityRequirements: on("ctl-a"), CapacityRange: &csi.CapacityRange{RequiredBytes: 2 * csidriver.GiB}})
	if err != nil {
		t.Fatal(err)
	}
	thick, err := d.Controller.CreateVolume(ctx, &csi.CreateVolumeRequest{Name: "ctl-thick-src", VolumeCapabilities: caps(capability("ext4", rwo)),
		Parameters: dc("thick"), AccessibilityRequirements: on("ctl-a")})
	if err != nil {
		t.Fatal(err)
	}
	fromVolume := func(id string) *csi.VolumeContentSource {
		return &csi.VolumeContentSource{Type: &csi.VolumeContentSource_Volume{Volume: &csi.VolumeContentSource_VolumeSource{VolumeId: id}}}
	}

	tests := []struct {
		name     string
		req      *csi.CreateVolumeRequest
		wantCode codes.Code
		wantSize int64
		wantNode string
	}{
		{name: "no size means 1 GiB", req: &csi.CreateVolumeRequest{VolumeCapabilities: caps(capability("ext4", rwo)), Parameters: dc("thick"), AccessibilityRequirements: on("ctl-b")},
			wantSize: csidriver.GiB, wantNode: "ctl-b"},
		{name: "rounded up to 4096", req: &csi.CreateVolumeRequest{VolumeCapabilities: caps(capability("block", rwo)), Parameters: dc("thin"), AccessibilityRequirements: on("ctl-b"),
			CapacityRange: &csi.CapacityRange{RequiredBytes: 100*1<<20 + 1}}, wantSize: 100<<20 + 4<<20, wantNode: "ctl-b"},
		{name: "xfs minimum 300Mi", req: &csi.CreateVolumeRequest{VolumeCapabilities: caps(capability("xfs", rwo)), Parameters: dc("thick"), AccessibilityRequirements: on("ctl-b"),
			CapacityRange: &csi.CapacityRange{RequiredBytes: 1}}, wantSize: 300 << 20, wantNode: "ctl-b"},
		{name: "no topology picks the node with most capacity", req: &csi.CreateVolumeRequest{VolumeCapabilities: caps(capability("ext4", rwo)), Parameters: dc("thick")},
			wantSize: csidriver.GiB, wantNode: "ctl-b"},
		{name: "no name", req: &csi.CreateVolumeRequest{VolumeCapabilities: caps(capability("ext4", rwo))}, wantCode: codes.InvalidArgument},
		{name: "no capabilities", req: &csi.CreateVolumeRequest{Name: "x"}, wantCode: codes.InvalidArgument},
		{name: "capability without access type", req: &csi.CreateVolumeRequest{Name: "x", VolumeCapabilities: caps(&csi.VolumeCapability{AccessMode: &csi.VolumeCapability_AccessMode{Mode: rwo}})}, wantCode: codes.InvalidArgument},
		{name: "multi-node access", req: &csi.CreateVolumeRequest{Name: "x", VolumeCapabilities: caps(capability("ext4", csi.VolumeCapability_AccessMode_MULTI_NODE_MULTI_WRITER))}, wantCode: codes.InvalidArgument},
		{name: "negative size", req: &csi.CreateVolumeRequest{Name: "x", VolumeCapabilities: caps(capability("ext4", rwo)), CapacityRange: &csi.CapacityRange{RequiredBytes: -1}}, wantCode: codes.InvalidArgument},
		{name: "negative limit", req: &csi.CreateVolumeRequest{Name: "x", VolumeCapabilities: caps(capability("ext4", rwo)), CapacityRange: &csi.CapacityRange{LimitBytes: -1}}, wantCode: codes.InvalidArgument},
		{name: "required above limit", req: &csi.CreateVolumeRequest{Name: "x", VolumeCapabilities: caps(capability("ext4", rwo)), CapacityRange: &csi.CapacityRange{RequiredBytes: 2 << 30, LimitBytes: 1 << 30}}, wantCode: codes.InvalidArgument},
		{name: "overflowing size", req: &csi.CreateVolumeRequest{Name: "x", VolumeCapabilities: caps(capability("ext4", rwo)), CapacityRange: &csi.CapacityRange{RequiredBytes: math.MaxInt64}}, wantCode: codes.InvalidArgument},
		{name: "unknown device class on a node", req: &csi.CreateVolumeRequest{Name: "x1", VolumeCapabilities: caps(capability("ext4", rwo)), Parameters: dc("nvme"), AccessibilityRequirements: on("ctl-a")}, wantCode: codes.NotFound},
		{name: "unknown device class, no topology", req: &csi.CreateVolumeRequest{Name: "x2", VolumeCapabilities: caps(capability("ext4", rwo)), Parameters: dc("nvme")}, wantCode: codes.ResourceExhausted},
		{name: "node does not exist", req: &csi.CreateVolumeRequest{Name: "x3", VolumeCapabilities: caps(capability("ext4", rwo)), AccessibilityRequirements: on("ctl-gone")}, wantCode: codes.ResourceExhausted},
		{name: "topology without the node key", req: &csi.CreateVolumeRequest{Name: "x4", VolumeCapabilities: caps(capability("ext4", rwo)),
			AccessibilityRequirements: &csi.TopologyRequirement{Requisite: []*csi.Topology{{Segments: map[string]string{"zone": "a"}}}}}, wantCode: codes.InvalidArgument},
		{name: "too big for the node", req: &csi.CreateVolumeRequest{Name: "x5", VolumeCapabilities: caps(capability("ext4", rwo)), Parameters: dc("thick"), AccessibilityRequirements: on("ctl-a"),
			CapacityRange: &csi.CapacityRange{RequiredBytes: 100 * csidriver.GiB}}, wantCode: codes.ResourceExhausted},
		{name: "clone of an unknown volume", req: &csi.CreateVolumeRequest{Name: "x6", VolumeCapabilities: caps(capability("ext4", rwo)), Parameters: dc("thin"), VolumeContentSource: fromVolume("nope")}, wantCode: codes.NotFound},
		{name: "clone into another device class", req: &csi.CreateVolumeRequest{Name: "x7", VolumeCapabilities: caps(capability("ext4", rwo)), Parameters: dc("thick"),
			CapacityRange: &csi.CapacityRange{RequiredBytes: 2 * csidriver.GiB}, VolumeContentSource: fromVolume(thin.Volume.VolumeId)}, wantCode: codes.InvalidArgument},
		{name: "clone smaller than its source", req: &csi.CreateVolumeRequest{Name: "x8", VolumeCapabilities: caps(capability("ext4", rwo)), Parameters: dc("thin"),
			CapacityRange: &csi.CapacityRange{RequiredBytes: csidriver.GiB}, VolumeContentSource: fromVolume(thin.Volume.VolumeId)}, wantCode: codes.OutOfRange},
		{name: "clone outside the allowed nodes", req: &csi.CreateVolumeRequest{Name: "x9", VolumeCapabilities: caps(capability("ext4", rwo)), Parameters: dc("thin"),
			CapacityRange: &csi.CapacityRange{RequiredBytes: 2 * csidriver.GiB}, VolumeContentSource: fromVolume(thin.Volume.VolumeId), AccessibilityRequirements: on("ctl-b")}, wantCode: codes.InvalidArgument},
		{name: "clone of a thick volume", req: &csi.CreateVolumeRequest{Name: "x10", VolumeCapabilities: caps(capability("ext4", rwo)), Parameters: dc("thick"),
			VolumeContentSource: fromVolume(thick.Volume.VolumeId)}, wantCode: codes.Unimplemented},
		{name: "clone of a thin volume", req: &csi.CreateVolumeRequest{Name: "x11", VolumeCapabilities: caps(capability("ext4", rwo)), Parameters: dc("thin"),
			CapacityRange: &csi.CapacityRange{RequiredBytes: 2 * csidriver.GiB}, VolumeContentSource: fromVolume(thin.Volume.VolumeId)}, wantSize: 2 * csidriver.GiB, wantNode: "ctl-a"},
	}
	for i, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if tc.req.Name == "" && tc.wantCode == codes.OK {
				tc.req.Name = "ctl-ok-" + string(rune('a'+i))
			}
			resp, err := d.Controller.CreateVolume(ctx, tc.req)
			if status.Code(err) != tc.wantCode {
				t.Fatalf("code %v (%v), want %v", status.Code(err), err, tc.wantCode)
			}
			if tc.wantCode != codes.OK {
				return
			}
			v := resp.GetVolume()
			if v.CapacityBytes != tc.wantSize || v.AccessibleTopology[0].Segments[names.TopologyKey()] != tc.wantNode {
				t.Errorf("volume %v, want %d bytes on %s", v, tc.wantSize, tc.wantNode)
			}
			if _, err := d.Controller.DeleteVolume(ctx, &csi.DeleteVolumeRequest{VolumeId: v.VolumeId}); err != nil {
				t.Errorf("DeleteVolume: %v", err)
			}
		})
	}

	t.Run("other calls", func(t *testing.T) {
		if _, err := d.Controller.CreateSnapshot(ctx, &csi.CreateSnapshotRequest{Name: "ctl-snap", SourceVolumeId: thick.Volume.VolumeId}); status.Code(err) != codes.Unimplemented {
			t.Errorf("snapshot of a thick volume: %v, want Unimplemented", err)
		}
		if _, err := d.Controller.ControllerExpandVolume(ctx, &csi.ControllerExpandVolumeRequest{VolumeId: "nope", CapacityRange: &csi.CapacityRange{RequiredBytes: 1}}); status.Code(err) != codes.NotFound {
			t.Errorf("expand unknown: %v, want NotFound", err)
		}
		if _, err := d.Controller.ControllerExpandVolume(ctx, &csi.ControllerExpandVolumeRequest{VolumeId: thick.Volume.VolumeId, CapacityRange: &csi.CapacityRange{RequiredBytes: 100 * csidriver.GiB}}); status.Code(err) != codes.Internal {
			t.Errorf("expand beyond the node: %v, want Internal (not enough space)", err)
		}
		if _, err := d.Controller.DeleteVolume(ctx, &csi.DeleteVolumeRequest{VolumeId: "nope"}); err != nil {
			t.Errorf("delete unknown: %v, want OK", err)
		}
		if _, err := d.Controller.ValidateVolumeCapabilities(ctx, &csi.ValidateVolumeCapabilitiesRequest{VolumeId: "nope", VolumeCapabilities: caps(capability("ext4", rwo))}); status.Code(err) != codes.NotFound {
			t.Errorf("validate unknown: %v, want NotFound", err)
		}
		capOf := func(node string) int64 {
			req := &csi.GetCapacityRequest{Parameters: dc("thick")}
			if node != "" {
				req.AccessibleTopology = &csi.Topology{Segments: map[string]string{names.TopologyKey(): node}}
			}
			resp, err := d.Controller.GetCapacity(ctx, req)
			if err != nil {
				t.Fatal(err)
			}
			return resp.AvailableCapacity
		}
		a, b := capOf("ctl-a"), capOf("ctl-b")
		if a != csidriver.ThickSize-csidriver.GiB || b != csidriver.ThickSize || capOf("ctl-gone") != 0 {
			t.Errorf("GetCapacity: a=%d b=%d gone=%d", a, b, capOf("ctl-gone"))
		}
		if total := capOf(""); total < a+b {
			t.Errorf("GetCapacity without topology %d, want at least %d", total, a+b)
		}
	})
}
