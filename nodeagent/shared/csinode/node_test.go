package csinode

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/lvms-dev/lvms/nodeagent/shared"
	"github.com/lvms-dev/lvms/nodeagent/shared/lockspace"
)

func capability(block bool, mode csi.VolumeCapability_AccessMode_Mode) *csi.VolumeCapability {
	c := &csi.VolumeCapability{AccessMode: &csi.VolumeCapability_AccessMode{Mode: mode}}
	if block {
		c.AccessType = &csi.VolumeCapability_Block{Block: &csi.VolumeCapability_BlockVolume{}}
	} else {
		c.AccessType = &csi.VolumeCapability_Mount{Mount: &csi.VolumeCapability_MountVolume{FsType: "xfs"}}
	}
	return c
}

// TestActivation: single-node access locks the LV exclusively, ReadWriteMany raw block shares it, and a
// file system is never shared between nodes (no cluster file system on an LV).
func TestActivation(t *testing.T) {
	cases := []struct {
		block bool
		mode  csi.VolumeCapability_AccessMode_Mode
		want  lockspace.Activation
		err   string
	}{
		{true, csi.VolumeCapability_AccessMode_SINGLE_NODE_WRITER, lockspace.Exclusive, ""},
		{false, csi.VolumeCapability_AccessMode_SINGLE_NODE_WRITER, lockspace.Exclusive, ""},
		{false, csi.VolumeCapability_AccessMode_SINGLE_NODE_SINGLE_WRITER, lockspace.Exclusive, ""},
		{true, csi.VolumeCapability_AccessMode_MULTI_NODE_MULTI_WRITER, lockspace.Shared, ""},
		{true, csi.VolumeCapability_AccessMode_MULTI_NODE_READER_ONLY, lockspace.Shared, ""},
		{false, csi.VolumeCapability_AccessMode_MULTI_NODE_MULTI_WRITER, "", "needs a raw block volume"},
		{false, csi.VolumeCapability_AccessMode_MULTI_NODE_READER_ONLY, "", "use volumeMode: Block"},
		{true, csi.VolumeCapability_AccessMode_UNKNOWN, "", "not supported"},
	}
	for _, tc := range cases {
		t.Run(fmt.Sprintf("block=%v %s", tc.block, tc.mode), func(t *testing.T) {
			got, err := Activation(capability(tc.block, tc.mode))
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("got %q, %v; want an error saying %q", got, err, tc.err)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Fatalf("got %q, %v; want %q", got, err, tc.want)
			}
		})
	}
	if _, err := Activation(nil); err == nil {
		t.Error("no capability accepted")
	}
	if _, err := Activation(&csi.VolumeCapability{}); err == nil {
		t.Error("a capability that is neither block nor mount accepted")
	}
}

// TestActivationErrors: another node's lock and a lockspace not joined are preconditions the kubelet
// retries, with lvm2's words kept; anything else is internal.
func TestActivationErrors(t *testing.T) {
	for _, tc := range []struct {
		err  error
		code codes.Code
		text string
	}{
		{&lockspace.LockedError{VG: "san", LV: "v1", Op: "activate (ey)", Stderr: "LV locked by other host"}, codes.FailedPrecondition, "another node holds it"},
		{fmt.Errorf("stage: %w", &shared.NotJoinedError{VG: "san", Node: "n1", Why: "waiting for sanlock"}), codes.FailedPrecondition, "not in the lockspace of shared volume group san: waiting for sanlock"},
		{errors.New("lvchange: exit status 5"), codes.Internal, "exit status 5"},
	} {
		err := activationError(tc.err)
		if status.Code(err) != tc.code || !strings.Contains(err.Error(), tc.text) {
			t.Errorf("%v: got %v, want %s saying %q", tc.err, err, tc.code, tc.text)
		}
	}
}

// TestRequestsValidated: malformed requests are refused before anything is looked up or activated.
func TestRequestsValidated(t *testing.T) {
	n := NewNode(Options{NodeName: "n1"})
	ctx := context.Background()
	rwo := capability(true, csi.VolumeCapability_AccessMode_SINGLE_NODE_WRITER)
	for name, req := range map[string]*csi.NodeStageVolumeRequest{
		"no volume":          {StagingTargetPath: "/s", VolumeCapability: rwo},
		"no staging path":    {VolumeId: "v", VolumeCapability: rwo},
		"relative path":      {VolumeId: "v", StagingTargetPath: "s", VolumeCapability: rwo},
		"no capability":      {VolumeId: "v", StagingTargetPath: "/s"},
		"shared file system": {VolumeId: "v", StagingTargetPath: "/s", VolumeCapability: capability(false, csi.VolumeCapability_AccessMode_MULTI_NODE_MULTI_WRITER)},
	} {
		if _, err := n.NodeStageVolume(ctx, req); status.Code(err) != codes.InvalidArgument {
			t.Errorf("%s: %v, want InvalidArgument", name, err)
		}
	}
	if _, err := n.NodeUnstageVolume(ctx, &csi.NodeUnstageVolumeRequest{StagingTargetPath: "/s"}); status.Code(err) != codes.InvalidArgument {
		t.Errorf("unstage without a volume: %v", err)
	}
	info, err := n.NodeGetInfo(ctx, &csi.NodeGetInfoRequest{})
	if err != nil || info.GetNodeId() != "n1" || info.GetAccessibleTopology() != nil {
		t.Errorf("NodeGetInfo = %+v, %v; want node n1 without topology", info, err)
	}
}
