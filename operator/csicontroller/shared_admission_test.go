package csicontroller

import (
	"context"
	"strings"
	"testing"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/lvms-dev/lvms/api/topolvm/driver"
)

// While the admission policy that keeps node agents to their node is not in place, no new shared volume is
// made (the node agents hold the shared volume groups' Leases and create the volumes), and the error says why.
func TestShared_CreateVolume_RefusedWhileNodeAgentsAreUnconfined(t *testing.T) {
	why := "the admission policy lvms-node-agent-own-node is missing and the operator cannot restore it"
	s := NewShared(nil, nil, Options{Names: driver.New(false), Admission: func() string { return why }})
	_, err := s.CreateVolume(context.Background(), &csi.CreateVolumeRequest{Name: "pvc-1",
		VolumeCapabilities: []*csi.VolumeCapability{{AccessType: &csi.VolumeCapability_Block{Block: &csi.VolumeCapability_BlockVolume{}},
			AccessMode: &csi.VolumeCapability_AccessMode{Mode: csi.VolumeCapability_AccessMode_MULTI_NODE_MULTI_WRITER}}},
		CapacityRange: &csi.CapacityRange{RequiredBytes: 1 << 30}})
	if status.Code(err) != codes.FailedPrecondition || !strings.Contains(err.Error(), "new volumes on shared volume groups are refused: "+why) {
		t.Fatalf("CreateVolume: %v; want FailedPrecondition saying why", err)
	}
}
