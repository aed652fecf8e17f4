package csinode

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	mountutil "k8s.io/mount-utils"
	utilexec "k8s.io/utils/exec"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/lvms-dev/lvms/api/topolvm/driver"
	topolvmv1 "github.com/lvms-dev/lvms/api/topolvm/v1"
	"github.com/lvms-dev/lvms/nodeagent/lvm"
	"github.com/lvms-dev/lvms/nodeagent/lvmdapi"
	"github.com/lvms-dev/lvms/nodeagent/lvmdapi/proto"
)

// Options configure the node service.
type Options struct {
	NodeName string
	Names    driver.Names
	// Client reads LogicalVolumes (to find a volume's device class).
	Client client.Reader
	// LVMD reaches lvmd for device paths and health.
	LVMD lvmdapi.Client
	// Mounter and Exec default to HostMounter and HostExec over Runner, so every mkfs, blkid, fsck, resize,
	// wipefs, mount and umount has a timeout and is killed with its process group when it hangs.
	Mounter mountutil.Interface
	Exec    utilexec.Interface
	// Runner runs the host commands of the default Mounter and Exec (zero: directly, lvm.DefaultTimeout).
	Runner lvm.Runner
	// OnRefused, when set, is told of every publication refused because a move holds the volume (fence.go). It
	// is called with the node service's lock held and must not block.
	OnRefused func(Refusal)
	// MountInfo is the mount table the fence reads ("": /proc/self/mountinfo).
	MountInfo string
	// MoveDeviceDir is where the fence finds a volume's device, <dir>/<vg>/<lv> ("": lvmd's path, /dev):
	// lvms local --simulated's nodes activate no volume and link stand-in devices there.
	MoveDeviceDir string
}

// Node is the CSI Node service. Every RPC that touches volumes is serialised, as in TopoLVM.
type Node struct {
	csi.UnimplementedNodeServer
	opts    Options
	mounter *mountutil.SafeFormatAndMount
	resizer *mountutil.ResizeFs
	mu      sync.Mutex
	// held maps the volumes the move fence holds to their move's ID (fence.go); guarded by mu.
	held map[string]string
}

var _ csi.NodeServer = (*Node)(nil)

// NewNode returns the node service.
func NewNode(opts Options) *Node {
	if opts.Exec == nil {
		opts.Exec = HostExec{Runner: opts.Runner}
	}
	if opts.Mounter == nil {
		opts.Mounter = NewHostMounter(opts.Runner)
	}
	return &Node{opts: opts, held: map[string]string{},
		mounter: &mountutil.SafeFormatAndMount{Interface: opts.Mounter, Exec: opts.Exec},
		resizer: mountutil.NewResizeFs(opts.Exec)}
}

// NodeGetCapabilities implements csi.NodeServer: stats, expansion, volume condition; no staging.
func (n *Node) NodeGetCapabilities(context.Context, *csi.NodeGetCapabilitiesRequest) (*csi.NodeGetCapabilitiesResponse, error) {
	var caps []*csi.NodeServiceCapability
	for _, t := range []csi.NodeServiceCapability_RPC_Type{
		csi.NodeServiceCapability_RPC_GET_VOLUME_STATS,
		csi.NodeServiceCapability_RPC_EXPAND_VOLUME,
		csi.NodeServiceCapability_RPC_VOLUME_CONDITION,
	} {
		caps = append(caps, &csi.NodeServiceCapability{Type: &csi.NodeServiceCapability_Rpc{Rpc: &csi.NodeServiceCapability_RPC{Type: t}}})
	}
	return &csi.NodeGetCapabilitiesResponse{Capabilities: caps}, nil
}

// NodeGetInfo implements csi.NodeServer.
func (n *Node) NodeGetInfo(context.Context, *csi.NodeGetInfoRequest) (*csi.NodeGetInfoResponse, error) {
	return &csi.NodeGetInfoResponse{
		NodeId:             n.opts.NodeName,
		AccessibleTopology: &csi.Topology{Segments: map[string]string{n.opts.Names.TopologyKey(): n.opts.NodeName}},
	}, nil
}

// findLV finds a volume's LV through its LogicalVolume's device class (the default one when the
// LogicalVolume is gone), and the LogicalVolume (nil when it is gone).
func (n *Node) findLV(ctx context.Context, volumeID string) (*proto.LogicalVolume, *topolvmv1.LogicalVolume, error) {
	list := &topolvmv1.LogicalVolumeList{}
	if err := n.opts.Client.List(ctx, list); err != nil {
		return nil, nil, status.Errorf(codes.Internal, "list LogicalVolumes: %v", err)
	}
	var obj *topolvmv1.LogicalVolume
	dc := ""
	if i := slices.IndexFunc(list.Items, func(lv topolvmv1.LogicalVolume) bool { return lv.Status.VolumeID == volumeID }); i >= 0 {
		obj = &list.Items[i]
		dc = obj.Spec.DeviceClass
	}
	resp, err := n.opts.LVMD.GetLVList(ctx, &proto.GetLVListRequest{DeviceClass: dc})
	if err != nil {
		return nil, nil, status.Errorf(status.Code(err), "list LVs of device class %q: %v", dc, err)
	}
	i := slices.IndexFunc(resp.GetVolumes(), func(v *proto.LogicalVolume) bool { return v.GetName() == volumeID })
	if i < 0 {
		return nil, nil, status.Errorf(codes.NotFound, "volume %s not found on node %s", volumeID, n.opts.NodeName)
	}
	return resp.GetVolumes()[i], obj, nil
}

// checkRequest refuses a volume ID that is not a plain LV name (it ends up in paths this root process
// removes) and requires the path.
func checkRequest(volumeID, pathField, path string) error {
	switch {
	case volumeID == "":
		return status.Error(codes.InvalidArgument, "volume_id is required")
	case len(volumeID) > 127 || volumeID == "." || volumeID == ".." || strings.ContainsAny(volumeID, "/\x00") || strings.HasPrefix(volumeID, "-"):
		return status.Errorf(codes.InvalidArgument, "volume_id %q is not an LVM volume name (at most 127 characters, no slash, not starting with '-')", volumeID)
	case path == "":
		return status.Errorf(codes.InvalidArgument, "%s is required", pathField)
	}
	return nil
}

// checkTarget is checkRequest for publish and unpublish, which create, mount, unmount and remove the target:
// it must also be absolute and clean, so no request reaches outside the directory kubelet gave.
func checkTarget(volumeID, path string) error {
	if err := checkRequest(volumeID, "target_path", path); err != nil {
		return err
	}
	if !filepath.IsAbs(path) || filepath.Clean(path) != path || strings.ContainsRune(path, 0) {
		return status.Errorf(codes.InvalidArgument, "target_path %q must be an absolute path without '..', '.' or repeated slashes", path)
	}
	return nil
}

// NodePublishVolume implements csi.NodeServer.
func (n *Node) NodePublishVolume(ctx context.Context, req *csi.NodePublishVolumeRequest) (*csi.NodePublishVolumeResponse, error) {
	if err := checkTarget(req.GetVolumeId(), req.GetTargetPath()); err != nil {
		return nil, err
	}
	switch {
	case req.GetVolumeCapability() == nil:
		return nil, status.Error(codes.InvalidArgument, "volume_capability is required")
	case req.GetVolumeCapability().GetBlock() == nil && req.GetVolumeCapability().GetMount() == nil:
		return nil, status.Error(codes.InvalidArgument, "volume_capability must be block or mount")
	}
	if m := req.GetVolumeCapability().GetAccessMode().GetMode(); m != csi.VolumeCapability_AccessMode_SINGLE_NODE_WRITER {
		return nil, status.Errorf(codes.FailedPrecondition, "access mode %s is not supported: TopoLVM volumes are single-node", m)
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	lv, obj, err := n.findLV(ctx, req.GetVolumeId())
	if err != nil {
		return nil, err
	}
	if err := n.refuseHeld(req.GetVolumeId(), obj, req.GetVolumeContext()); err != nil {
		return nil, err
	}
	if err := n.publish(req, lv.GetPath()); err != nil {
		return nil, err
	}
	return &csi.NodePublishVolumeResponse{}, nil
}

// PublishDevice publishes device as req asks (a file system formatted when blank and mounted, or the
// device bind-mounted for a block volume): the shared driver's node service publishes its LVs this way.
func (n *Node) PublishDevice(req *csi.NodePublishVolumeRequest, device string) error {
	if err := checkTarget(req.GetVolumeId(), req.GetTargetPath()); err != nil {
		return err
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.publish(req, device)
}

func (n *Node) publish(req *csi.NodePublishVolumeRequest, device string) error {
	if req.GetVolumeCapability().GetBlock() != nil {
		return n.publishBlock(req, device)
	}
	return n.publishFilesystem(req, device)
}

func (n *Node) publishFilesystem(req *csi.NodePublishVolumeRequest, device string) error {
	mount := req.GetVolumeCapability().GetMount()
	fsType := mount.GetFsType()
	if fsType == "" {
		fsType = "ext4"
	}
	var opts []string
	if req.GetReadonly() {
		opts = append(opts, "ro")
	}
	for _, f := range mount.GetMountFlags() {
		if f == "rw" && req.GetReadonly() {
			return status.Error(codes.InvalidArgument, "mount flag rw contradicts a read-only publish")
		}
		opts = append(opts, f)
	}
	if fsType == "xfs" && !slices.Contains(opts, "nouuid") {
		opts = append(opts, "nouuid")
	}
	target := req.GetTargetPath()
	if err := os.MkdirAll(target, 0o755); err != nil {
		return status.Errorf(codes.Internal, "create target directory %s: %v", target, err)
	}
	mounted, err := n.mounter.IsMountPoint(target)
	if err != nil {
		return status.Errorf(codes.Internal, "check mount point %s: %v", target, err)
	}
	if mounted {
		return nil
	}
	existing, err := n.mounter.GetDiskFormat(device)
	if err != nil {
		return status.Errorf(codes.Internal, "read the file system type of %s: %v", device, err)
	}
	if existing != "" && existing != fsType {
		return status.Errorf(codes.Internal, "volume %s holds %s, not the requested %s", req.GetVolumeId(), existing, fsType)
	}
	if existing == "" {
		// Stray signatures (such as a RAID member label) make mkfs refuse or misdetect the device.
		if out, err := n.opts.Exec.Command("wipefs", "-a", device).CombinedOutput(); err != nil {
			return status.Errorf(codes.Internal, "wipefs -a %s: %v: %s", device, err, out)
		}
		err = n.mounter.FormatAndMount(device, target, fsType, opts)
	} else {
		err = n.mounter.Mount(device, target, fsType, opts)
	}
	if err != nil {
		return status.Errorf(codes.Internal, "mount %s on %s: %v", device, target, err)
	}
	if err := os.Chmod(target, 0o777|os.ModeSetgid); err != nil {
		return status.Errorf(codes.Internal, "chmod %s: %v", target, err)
	}
	if !req.GetReadonly() {
		// A volume grown while it was not published grows its file system now.
		if need, err := n.resizer.NeedResize(device, target); err != nil {
			return status.Errorf(codes.Internal, "check whether the file system on %s needs to grow: %v", device, err)
		} else if need {
			if _, err := n.resizer.Resize(device, target); err != nil {
				return status.Errorf(codes.Internal, "grow the file system on %s: %v", device, err)
			}
		}
	}
	return nil
}

func (n *Node) publishBlock(req *csi.NodePublishVolumeRequest, device string) error {
	target := req.GetTargetPath()
	f, err := os.OpenFile(target, os.O_CREATE|os.O_RDONLY, 0o755)
	if err != nil && !errors.Is(err, os.ErrExist) {
		return status.Errorf(codes.Internal, "create target file %s: %v", target, err)
	}
	if f != nil {
		_ = f.Close()
	}
	if err := os.Chmod(target, 0o755); err != nil {
		return status.Errorf(codes.Internal, "chmod %s: %v", target, err)
	}
	mounted, err := n.mounter.IsMountPoint(target)
	if err != nil {
		return status.Errorf(codes.Internal, "check mount point %s: %v", target, err)
	}
	if mounted {
		return nil
	}
	opts := []string{"bind"}
	if req.GetReadonly() {
		opts = append(opts, "ro")
	}
	if err := n.mounter.Mount(device, target, "", opts); err != nil {
		return status.Errorf(codes.Internal, "bind-mount %s on %s: %v", device, target, err)
	}
	return nil
}

// NodeUnpublishVolume implements csi.NodeServer; a target that does not exist is unpublished already.
func (n *Node) NodeUnpublishVolume(_ context.Context, req *csi.NodeUnpublishVolumeRequest) (*csi.NodeUnpublishVolumeResponse, error) {
	if err := checkTarget(req.GetVolumeId(), req.GetTargetPath()); err != nil {
		return nil, err
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	// TopoLVM before v0.33 made its own device files; remove a leftover one.
	_ = os.Remove("/dev/topolvm/" + req.GetVolumeId())
	if _, err := os.Stat(req.GetTargetPath()); errors.Is(err, os.ErrNotExist) {
		return &csi.NodeUnpublishVolumeResponse{}, nil
	}
	if err := mountutil.CleanupMountPoint(req.GetTargetPath(), n.opts.Mounter, true); err != nil {
		return nil, status.Errorf(codes.Internal, "unmount %s: %v", req.GetTargetPath(), err)
	}
	return &csi.NodeUnpublishVolumeResponse{}, nil
}

// mountedDevice returns the device mounted on path.
func (n *Node) mountedDevice(path string) (string, error) {
	mps, err := n.opts.Mounter.List()
	if err != nil {
		return "", fmt.Errorf("list mounts: %w", err)
	}
	for _, mp := range mps {
		if mp.Path == path {
			return mp.Device, nil
		}
	}
	return "", fmt.Errorf("nothing is mounted on %s", path)
}
