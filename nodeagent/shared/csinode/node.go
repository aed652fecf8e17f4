// Package csinode is the CSI Node service of the shared driver (shared.lvm.topolvm.io): NodeStage activates
// the volume's LV on this node — exclusively (lvchange -aey) for single-node access, shared (-asy) for
// ReadWriteMany raw block, the access VM live migration needs — and records it in the node's status;
// NodeUnstage deactivates it and releases the lock; publish and unpublish are the TopoLVM driver's (a file
// system formatted when blank and mounted, or the device bind-mounted). No node topology: every node in the
// volume group's lockspace can stage any volume, and lvmlockd refuses a node while another holds a
// conflicting lock. File systems are single-node only.
package csinode

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"sync"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/lvms-dev/lvms/api/topolvm/driver"
	topolvmv1 "github.com/lvms-dev/lvms/api/topolvm/v1"
	topolvmnode "github.com/lvms-dev/lvms/nodeagent/csinode"
	"github.com/lvms-dev/lvms/nodeagent/shared"
	"github.com/lvms-dev/lvms/nodeagent/shared/lockspace"
	"github.com/lvms-dev/lvms/nodeagent/shared/volumes"
)

// Activator is the node's part of the shared volume groups (shared.Node).
type Activator interface {
	Activate(ctx context.Context, vg, lv string, how lockspace.Activation) error
	Deactivate(ctx context.Context, vg, lv string) error
	// ActiveIn is the volume group in which lv is active on this node ("" when it is not).
	ActiveIn(ctx context.Context, lv string) (string, error)
}

// Options configure the node service.
type Options struct {
	NodeName string
	// Client reads LogicalVolumes (a volume's shared volume group).
	Client client.Reader
	Node   Activator
	// Publisher publishes a device at a target path (the TopoLVM node service's PublishDevice).
	Publisher *topolvmnode.Node
}

// Node is the CSI Node service of the shared driver.
type Node struct {
	csi.UnimplementedNodeServer
	opts Options
	mu   sync.Mutex
}

var _ csi.NodeServer = (*Node)(nil)

// NewNode returns the node service.
func NewNode(opts Options) *Node { return &Node{opts: opts} }

// NodeGetCapabilities implements csi.NodeServer: staging (activation) only.
func (n *Node) NodeGetCapabilities(context.Context, *csi.NodeGetCapabilitiesRequest) (*csi.NodeGetCapabilitiesResponse, error) {
	return &csi.NodeGetCapabilitiesResponse{Capabilities: []*csi.NodeServiceCapability{{Type: &csi.NodeServiceCapability_Rpc{
		Rpc: &csi.NodeServiceCapability_RPC{Type: csi.NodeServiceCapability_RPC_STAGE_UNSTAGE_VOLUME}}}}}, nil
}

// NodeGetInfo implements csi.NodeServer: no topology, every node of the lockspace reaches every volume.
func (n *Node) NodeGetInfo(context.Context, *csi.NodeGetInfoRequest) (*csi.NodeGetInfoResponse, error) {
	return &csi.NodeGetInfoResponse{NodeId: n.opts.NodeName}, nil
}

// Activation is how a capability activates a volume: shared for multi-node raw block, exclusive for
// single-node access; a multi-node file system is refused (no cluster file system on the LV).
func Activation(c *csi.VolumeCapability) (lockspace.Activation, error) {
	if c == nil {
		return "", errors.New("volume_capability is required")
	}
	if c.GetBlock() == nil && c.GetMount() == nil {
		return "", errors.New("volume_capability must be block or mount")
	}
	switch m := c.GetAccessMode().GetMode(); m {
	case csi.VolumeCapability_AccessMode_SINGLE_NODE_WRITER, csi.VolumeCapability_AccessMode_SINGLE_NODE_SINGLE_WRITER,
		csi.VolumeCapability_AccessMode_SINGLE_NODE_MULTI_WRITER, csi.VolumeCapability_AccessMode_SINGLE_NODE_READER_ONLY:
		return lockspace.Exclusive, nil
	case csi.VolumeCapability_AccessMode_MULTI_NODE_MULTI_WRITER, csi.VolumeCapability_AccessMode_MULTI_NODE_READER_ONLY,
		csi.VolumeCapability_AccessMode_MULTI_NODE_SINGLE_WRITER:
		if c.GetBlock() == nil {
			return "", fmt.Errorf("access mode %s needs a raw block volume: a file system on a shared volume is single-node (ReadWriteOnce); use volumeMode: Block for ReadWriteMany", m)
		}
		return lockspace.Shared, nil
	default:
		return "", fmt.Errorf("access mode %s is not supported", m)
	}
}

// volume finds the shared LogicalVolume whose volume ID is id and returns its volume group.
func (n *Node) volume(ctx context.Context, id string) (*topolvmv1.LogicalVolume, string, error) {
	list := &topolvmv1.LogicalVolumeList{}
	if err := n.opts.Client.List(ctx, list); err != nil {
		return nil, "", status.Errorf(codes.Internal, "list LogicalVolumes: %v", err)
	}
	for i := range list.Items {
		lv := &list.Items[i]
		if lv.Status.VolumeID != id {
			continue
		}
		if !volumes.IsShared(lv) || lv.Status.VolumeID != string(lv.UID) {
			return nil, "", status.Errorf(codes.NotFound, "volume %s is not a volume of %s", id, driver.SharedDriver)
		}
		return lv, lv.Annotations[driver.SharedVolumeGroupAnnotation], nil
	}
	return nil, "", status.Errorf(codes.NotFound, "volume %s not found", id)
}

func checkPath(field, p string) error {
	if p == "" {
		return status.Errorf(codes.InvalidArgument, "%s is required", field)
	}
	if !filepath.IsAbs(p) || strings.Contains(p, "\x00") {
		return status.Errorf(codes.InvalidArgument, "%s %q must be an absolute path", field, p)
	}
	return nil
}

// NodeStageVolume implements csi.NodeServer: it activates the LV on this node.
func (n *Node) NodeStageVolume(ctx context.Context, req *csi.NodeStageVolumeRequest) (*csi.NodeStageVolumeResponse, error) {
	if req.GetVolumeId() == "" {
		return nil, status.Error(codes.InvalidArgument, "volume_id is required")
	}
	if err := checkPath("staging_target_path", req.GetStagingTargetPath()); err != nil {
		return nil, err
	}
	how, err := Activation(req.GetVolumeCapability())
	if err != nil {
		return nil, status.Error(codes.InvalidArgument, err.Error())
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	_, vg, err := n.volume(ctx, req.GetVolumeId())
	if err != nil {
		return nil, err
	}
	if err := n.opts.Node.Activate(ctx, vg, req.GetVolumeId(), how); err != nil {
		return nil, activationError(err)
	}
	return &csi.NodeStageVolumeResponse{}, nil
}

// activationError gives lvm2's refusals their CSI codes: another node's lock and a lockspace this node has
// not joined are preconditions the kubelet retries; anything else is internal.
func activationError(err error) error {
	var locked *lockspace.LockedError
	var notJoined *shared.NotJoinedError
	switch {
	case errors.As(err, &locked), errors.As(err, &notJoined):
		return status.Error(codes.FailedPrecondition, err.Error())
	case strings.Contains(err.Error(), "unstage it before"):
		return status.Error(codes.FailedPrecondition, err.Error())
	}
	return status.Error(codes.Internal, err.Error())
}

// NodeUnstageVolume implements csi.NodeServer: it deactivates the LV on this node, which releases its lock
// for other nodes. A volume that is not active here is unstaged already.
func (n *Node) NodeUnstageVolume(ctx context.Context, req *csi.NodeUnstageVolumeRequest) (*csi.NodeUnstageVolumeResponse, error) {
	if req.GetVolumeId() == "" {
		return nil, status.Error(codes.InvalidArgument, "volume_id is required")
	}
	if err := checkPath("staging_target_path", req.GetStagingTargetPath()); err != nil {
		return nil, err
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	vg, err := n.opts.Node.ActiveIn(ctx, req.GetVolumeId())
	if err != nil {
		return nil, status.Error(codes.Internal, err.Error())
	}
	if vg == "" {
		return &csi.NodeUnstageVolumeResponse{}, nil
	}
	if err := n.opts.Node.Deactivate(ctx, vg, req.GetVolumeId()); err != nil {
		return nil, activationError(err)
	}
	return &csi.NodeUnstageVolumeResponse{}, nil
}

// NodePublishVolume implements csi.NodeServer: the staged (active) LV is published at the target path.
func (n *Node) NodePublishVolume(ctx context.Context, req *csi.NodePublishVolumeRequest) (*csi.NodePublishVolumeResponse, error) {
	if req.GetVolumeId() == "" {
		return nil, status.Error(codes.InvalidArgument, "volume_id is required")
	}
	if _, err := Activation(req.GetVolumeCapability()); err != nil {
		return nil, status.Error(codes.InvalidArgument, err.Error())
	}
	n.mu.Lock()
	vg, err := n.opts.Node.ActiveIn(ctx, req.GetVolumeId())
	n.mu.Unlock()
	if err != nil {
		return nil, status.Error(codes.Internal, err.Error())
	}
	if vg == "" {
		return nil, status.Errorf(codes.FailedPrecondition, "volume %s is not staged (active) on node %s: stage it first", req.GetVolumeId(), n.opts.NodeName)
	}
	if err := n.opts.Publisher.PublishDevice(req, lockspace.DevicePath(vg, req.GetVolumeId())); err != nil {
		return nil, err
	}
	return &csi.NodePublishVolumeResponse{}, nil
}

// NodeUnpublishVolume implements csi.NodeServer.
func (n *Node) NodeUnpublishVolume(ctx context.Context, req *csi.NodeUnpublishVolumeRequest) (*csi.NodeUnpublishVolumeResponse, error) {
	return n.opts.Publisher.NodeUnpublishVolume(ctx, req)
}
