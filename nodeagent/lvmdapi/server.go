package lvmdapi

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"golang.org/x/sys/unix"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/lvms-dev/lvms/nodeagent/lvm"
	"github.com/lvms-dev/lvms/nodeagent/lvmd"
	"github.com/lvms-dev/lvms/nodeagent/lvmdapi/proto"
)

// sectorSize is the granularity of LV sizes lvmd accepts.
const sectorSize = 4096

// WatchInterval is how often Watch sends capacity without a change.
const WatchInterval = 10 * time.Minute

// ConfigFunc returns the current device-class configuration; the service calls it on every request, so a
// reloaded lvmd.yaml takes effect without a restart.
type ConfigFunc func() (*lvmd.Config, error)

// Server implements LVService and VGService. LVM changes are serialised per volume group.
type Server struct {
	proto.UnimplementedLVServiceServer
	proto.UnimplementedVGServiceServer

	runner lvm.Runner
	config ConfigFunc
	// interval between unprompted Watch messages.
	interval time.Duration

	vgLocks  keyedMutex // serialises LVM changes per volume group
	wmu      sync.Mutex
	watchers map[chan struct{}]struct{}
}

var (
	_ proto.LVServiceServer = (*Server)(nil)
	_ proto.VGServiceServer = (*Server)(nil)
)

// NewServer returns a service running lvm2 through runner with the device classes config returns.
func NewServer(runner lvm.Runner, config ConfigFunc) *Server {
	return &Server{runner: runner, config: config, interval: WatchInterval, watchers: map[chan struct{}]struct{}{}}
}

// StaticConfig returns a ConfigFunc for a fixed configuration.
func StaticConfig(c *lvmd.Config) ConfigFunc { return func() (*lvmd.Config, error) { return c, nil } }

// class resolves a device class name into its state.
func (s *Server) class(ctx context.Context, name string) (classState, error) {
	d, err := s.deviceClass(name)
	if err != nil {
		return classState{}, err
	}
	return s.state(ctx, d)
}

// lockedClass is class for a change: it holds the lock of the class's volume group until unlock is
// called (on success only). Changes on different volume groups run concurrently; lvm2 serialises what
// it must with its own per-VG locks.
func (s *Server) lockedClass(ctx context.Context, name string) (st classState, unlock func(), err error) {
	d, err := s.deviceClass(name)
	if err != nil {
		return classState{}, nil, err
	}
	unlockHere := s.vgLocks.lock(d.VolumeGroup)
	// The file lock also keeps out the agent removing the volume group or a pool (another process when
	// lvmd runs on its own), and the state is read under it.
	unlockVG, err := s.runner.LockVG(ctx, d.VolumeGroup)
	if err != nil {
		unlockHere()
		return classState{}, nil, status.Errorf(codes.Unavailable, "%v", err)
	}
	unlock = func() { unlockVG(); unlockHere() }
	st, err = s.state(ctx, d)
	if err != nil {
		unlock()
		return classState{}, nil, err
	}
	return st, unlock, nil
}

func (s *Server) deviceClass(name string) (lvmd.DeviceClass, error) {
	cfg, err := s.config()
	if err != nil {
		return lvmd.DeviceClass{}, status.Errorf(codes.Unavailable, "read lvmd configuration: %v", err)
	}
	d, err := deviceClass(cfg, name)
	if err != nil {
		return lvmd.DeviceClass{}, status.Error(codes.NotFound, err.Error())
	}
	return d, nil
}

func (s *Server) state(ctx context.Context, d lvmd.DeviceClass) (classState, error) {
	rep, err := s.runner.FullReport(ctx)
	if err != nil {
		return classState{}, lvmStatus(err)
	}
	st, err := stateOf(rep, d)
	if err != nil {
		return classState{}, status.Errorf(codes.Internal, "%v: check lvmd.yaml and the node's LVM state", err)
	}
	return st, nil
}

// keyedMutex is one mutex per key (volume group name); the few keys are never freed.
type keyedMutex struct {
	mu sync.Mutex
	m  map[string]*sync.Mutex
}

// lock locks key's mutex and returns its unlock.
func (k *keyedMutex) lock(key string) func() {
	k.mu.Lock()
	if k.m == nil {
		k.m = map[string]*sync.Mutex{}
	}
	l, ok := k.m[key]
	if !ok {
		l = &sync.Mutex{}
		k.m[key] = l
	}
	k.mu.Unlock()
	l.Lock()
	return l.Unlock
}

func toProto(lv lvm.LV) *proto.LogicalVolume {
	out := &proto.LogicalVolume{Name: lv.Name, Tags: slices.Clone(lv.Tags), SizeBytes: int64(lv.Size), Path: lv.Path, Attr: lv.Attr}
	// The device numbers come from the device file when this process sees the host's /dev (the agent
	// mounts it); otherwise they stay 0, as TopoLVM reports for inactive LVs.
	var st unix.Stat_t
	if lv.Path != "" && unix.Stat(lv.Path, &st) == nil && st.Mode&unix.S_IFMT == unix.S_IFBLK {
		out.DevMajor, out.DevMinor = unix.Major(uint64(st.Rdev)), unix.Minor(uint64(st.Rdev))
	}
	return out
}

// lvmStatus converts an lvm2 failure into a gRPC status.
func lvmStatus(err error) error {
	if lvm.IsNotFound(err) {
		return status.Error(codes.NotFound, err.Error())
	}
	if re, ok := lvm.AsRemovalRefused(err); ok {
		if re.NotAVolume {
			return status.Error(codes.FailedPrecondition, err.Error())
		}
		return status.Error(codes.PermissionDenied, err.Error())
	}
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return status.FromContextError(err).Err()
	}
	return status.Error(codes.Internal, err.Error())
}

// find reads the state again and returns the named volume.
func (s *Server) find(ctx context.Context, dc, name string) (lvm.LV, error) {
	st, err := s.class(ctx, dc)
	if err != nil {
		return lvm.LV{}, err
	}
	lv, ok := st.volume(name)
	if !ok {
		return lvm.LV{}, status.Errorf(codes.NotFound, "logical volume %s not found in device class %q", name, st.class.Name)
	}
	return lv, nil
}

// CreateLV implements LVService.
func (s *Server) CreateLV(ctx context.Context, req *proto.CreateLVRequest) (*proto.CreateLVResponse, error) {
	if req.GetName() == "" {
		return nil, status.Error(codes.InvalidArgument, "name is required")
	}
	if req.GetSizeBytes() <= 0 || req.GetSizeBytes()%sectorSize != 0 {
		return nil, status.Errorf(codes.InvalidArgument, "size %d must be a positive multiple of %d bytes", req.GetSizeBytes(), sectorSize)
	}
	st, unlock, err := s.lockedClass(ctx, req.GetDeviceClass())
	if err != nil {
		return nil, err
	}
	defer unlock()
	if lv, ok := st.volume(req.GetName()); ok {
		return &proto.CreateLVResponse{Volume: toProto(lv)}, nil
	}
	if err := st.pastThreshold(); err != nil {
		return nil, err
	}
	size := uint64(req.GetSizeBytes())
	if free := st.allocatable(); free < size {
		return nil, status.Errorf(codes.ResourceExhausted, "not enough space in device class %q: %d bytes requested, %d bytes free%s", st.class.Name, size, free, st.spaceDetail())
	}
	spec := lvm.VolumeSpec{VG: st.vg.Name, Name: req.GetName(), Size: size, Tags: volumeTags(req.GetTags())}
	if isThin(st.class) {
		spec.Pool = st.class.ThinPool.Name
	}
	if oc := req.GetLvcreateOptionClass(); oc != "" {
		cfg, err := s.config()
		if err != nil {
			return nil, status.Errorf(codes.Unavailable, "read lvmd configuration: %v", err)
		}
		o, ok := optionClass(cfg, oc)
		if !ok {
			return nil, status.Errorf(codes.Internal, "lvcreate-option-class %q is not in lvmd.yaml", oc)
		}
		spec.Options = o.Options
	} else {
		if st.class.Stripe != nil {
			spec.Stripes, spec.StripeSize = *st.class.Stripe, st.class.StripeSize
		}
		spec.Options = st.class.LVCreateOptions
	}
	if err := s.runner.CreateVolume(ctx, spec); err != nil {
		return nil, lvmStatus(err)
	}
	s.notify()
	lv, err := s.find(ctx, req.GetDeviceClass(), req.GetName())
	if err != nil {
		return nil, err
	}
	return &proto.CreateLVResponse{Volume: toProto(lv)}, nil
}

// RemoveLV implements LVService. It removes only a volume of the device class that LVMS or TopoLVM
// created (lvm.CheckVolumeRemoval): a thin pool, an internal LV or an LV of another class is refused with
// FailedPrecondition, a volume someone else created with PermissionDenied, and nothing is run.
func (s *Server) RemoveLV(ctx context.Context, req *proto.RemoveLVRequest) (*proto.Empty, error) {
	st, unlock, err := s.lockedClass(ctx, req.GetDeviceClass())
	if err != nil {
		return nil, err
	}
	defer unlock()
	lv, ok := st.volume(req.GetName())
	if !ok {
		return nil, notAVolume(st, req.GetName())
	}
	if err := s.runner.RemoveVolume(ctx, lv); err != nil {
		return nil, lvmStatus(err)
	}
	s.notify()
	return &proto.Empty{}, nil
}

// notAVolume is the answer for a name that is not a volume of the class: NotFound when the VG has no
// such LV, FailedPrecondition naming what it is otherwise.
func notAVolume(st classState, name string) error {
	lv, ok := st.lv(name)
	if !ok {
		return status.Errorf(codes.NotFound, "logical volume %s not found in device class %q", name, st.class.Name)
	}
	if err := lvm.CheckVolumeRemoval(lv); err != nil {
		if re, ok := lvm.AsRemovalRefused(err); ok && re.NotAVolume {
			return status.Error(codes.FailedPrecondition, err.Error())
		}
	}
	return status.Errorf(codes.FailedPrecondition, "logical volume %s/%s is not a volume of device class %q; lvmd acts only on the volumes of the class asked for",
		st.vg.Name, name, st.class.Name)
}

// volumeTags are the tags of a new volume: the client's, and lvm.VolumeTag, which marks it as created
// here (and so removable) whoever the client is.
func volumeTags(req []string) []string {
	if slices.Contains(req, lvm.VolumeTag) {
		return slices.Clone(req)
	}
	return append(slices.Clone(req), lvm.VolumeTag)
}

// ResizeLV implements LVService. It never shrinks: a request at or below the current size returns the
// current size.
func (s *Server) ResizeLV(ctx context.Context, req *proto.ResizeLVRequest) (*proto.ResizeLVResponse, error) {
	if req.GetSizeBytes() <= 0 || req.GetSizeBytes()%sectorSize != 0 {
		return nil, status.Errorf(codes.InvalidArgument, "size %d must be a positive multiple of %d bytes", req.GetSizeBytes(), sectorSize)
	}
	st, unlock, err := s.lockedClass(ctx, req.GetDeviceClass())
	if err != nil {
		return nil, err
	}
	defer unlock()
	lv, ok := st.volume(req.GetName())
	if !ok {
		return nil, status.Errorf(codes.NotFound, "logical volume %s not found in device class %q", req.GetName(), st.class.Name)
	}
	want := uint64(req.GetSizeBytes())
	if want <= lv.Size {
		return &proto.ResizeLVResponse{SizeBytes: int64(lv.Size)}, nil
	}
	if err := st.pastThreshold(); err != nil {
		return nil, err
	}
	if free := st.allocatable(); free < want-lv.Size {
		return nil, status.Errorf(codes.ResourceExhausted, "not enough space in device class %q to grow %s by %d bytes: %d bytes free%s",
			st.class.Name, lv.Name, want-lv.Size, free, st.spaceDetail())
	}
	if err := s.runner.ResizeLV(ctx, st.vg.Name, lv.Name, want); err != nil {
		return nil, lvmStatus(err)
	}
	s.notify()
	lv, err = s.find(ctx, req.GetDeviceClass(), req.GetName())
	if err != nil {
		return nil, err
	}
	return &proto.ResizeLVResponse{SizeBytes: int64(lv.Size)}, nil
}

// CreateLVSnapshot implements LVService: a thin snapshot (access type "ro", made read-only) or a clone
// ("rw", activated writable) of a thin volume.
func (s *Server) CreateLVSnapshot(ctx context.Context, req *proto.CreateLVSnapshotRequest) (*proto.CreateLVSnapshotResponse, error) {
	if req.GetName() == "" || req.GetSourceVolume() == "" {
		return nil, status.Error(codes.InvalidArgument, "name and source_volume are required")
	}
	if at := req.GetAccessType(); at != "ro" && at != "rw" {
		return nil, status.Errorf(codes.InvalidArgument, "access_type %q must be ro or rw", at)
	}
	if req.GetSizeBytes() < 0 || req.GetSizeBytes()%sectorSize != 0 {
		return nil, status.Errorf(codes.InvalidArgument, "size %d must be a multiple of %d bytes", req.GetSizeBytes(), sectorSize)
	}
	st, unlock, err := s.lockedClass(ctx, req.GetDeviceClass())
	if err != nil {
		return nil, err
	}
	defer unlock()
	if !isThin(st.class) {
		return nil, status.Errorf(codes.Unimplemented, "device class %q is thick: snapshots and clones need a thin device class", st.class.Name)
	}
	if lv, ok := st.volume(req.GetName()); ok {
		return &proto.CreateLVSnapshotResponse{Snapshot: toProto(lv)}, nil
	}
	src, ok := st.volume(req.GetSourceVolume())
	if !ok {
		return nil, status.Errorf(codes.NotFound, "source volume %s not found in device class %q", req.GetSourceVolume(), st.class.Name)
	}
	want := uint64(req.GetSizeBytes())
	if want == 0 {
		want = src.Size
	}
	if want < src.Size {
		return nil, status.Errorf(codes.OutOfRange, "requested size %d is smaller than the source volume's %d bytes", want, src.Size)
	}
	if err := st.pastThreshold(); err != nil {
		return nil, err
	}
	if free := st.allocatable(); free < want {
		return nil, status.Errorf(codes.ResourceExhausted, "not enough space in device class %q: %d bytes requested, %d bytes free%s", st.class.Name, want, free, st.spaceDetail())
	}
	vg := st.vg.Name
	if err := s.runner.CreateThinSnapshot(ctx, vg, src.Name, req.GetName(), volumeTags(req.GetTags())); err != nil {
		return nil, lvmStatus(err)
	}
	s.notify()
	if err := s.finishSnapshot(ctx, vg, req.GetName(), want, src.Size, req.GetAccessType()); err != nil {
		// By name without a check: lvcreate above made this LV in this call (it fails on an existing name).
		if rerr := s.runner.RemoveLV(ctx, vg, req.GetName()); rerr != nil {
			err = fmt.Errorf("%w (and removing it failed: %v)", err, rerr)
		}
		return nil, lvmStatus(err)
	}
	lv, err := s.find(ctx, req.GetDeviceClass(), req.GetName())
	if err != nil {
		return nil, err
	}
	return &proto.CreateLVSnapshotResponse{Snapshot: toProto(lv)}, nil
}

func (s *Server) finishSnapshot(ctx context.Context, vg, name string, want, srcSize uint64, access string) error {
	if want > srcSize {
		if err := s.runner.ResizeLV(ctx, vg, name, want); err != nil {
			return err
		}
	}
	if access == "ro" {
		return s.runner.SetReadOnly(ctx, vg, name)
	}
	return s.runner.ActivateWritable(ctx, vg, name)
}

// GetLVList implements VGService.
func (s *Server) GetLVList(ctx context.Context, req *proto.GetLVListRequest) (*proto.GetLVListResponse, error) {
	st, err := s.class(ctx, req.GetDeviceClass())
	if err != nil {
		return nil, err
	}
	out := &proto.GetLVListResponse{}
	for _, lv := range st.volumes {
		out.Volumes = append(out.Volumes, toProto(lv))
	}
	return out, nil
}

// GetFreeBytes implements VGService: the class's free bytes less spare (spare applies to thin classes
// here too, as in TopoLVM), at least 0.
func (s *Server) GetFreeBytes(ctx context.Context, req *proto.GetFreeBytesRequest) (*proto.GetFreeBytesResponse, error) {
	st, err := s.class(ctx, req.GetDeviceClass())
	if err != nil {
		return nil, err
	}
	return &proto.GetFreeBytesResponse{FreeBytes: subFloor(st.allocatable(), spare(st.class))}, nil
}
