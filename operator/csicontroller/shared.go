package csicontroller

import (
	"context"
	"fmt"
	"hash/fnv"
	"slices"
	"strings"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"

	lvmv2 "github.com/lvms-dev/lvms/api/lvm/v2alpha1"
	"github.com/lvms-dev/lvms/api/topolvm/driver"
	topolvmv1 "github.com/lvms-dev/lvms/api/topolvm/v1"
	sharedcsinode "github.com/lvms-dev/lvms/nodeagent/shared/csinode"
	"github.com/lvms-dev/lvms/nodeagent/shared/hostid"
	sharedvolumes "github.com/lvms-dev/lvms/nodeagent/shared/volumes"
)

// Shared is the CSI Controller service of the shared driver (shared.lvm.topolvm.io): linear LVs on a
// Shared volume group of an LVMNodeSet, created inactive by the agent of a node in the volume group's
// lockspace (the worker, named in the LogicalVolume's annotations; the operator holds no lock), with no node
// topology. Where each volume is active comes from the LVMNodes' status (lvs cannot see other nodes): a
// volume active anywhere is neither removed nor grown (shared volumes grow offline), and lvmlockd refuses
// both anyway.
type Shared struct {
	csi.UnimplementedControllerServer

	client    client.Client
	names     driver.Names
	minimum   MinimumAllocation
	volumes   *volumes
	nameLocks keyLocks
	ids       keyLocks
	clock     clock.PassiveClock
	admission func() string
}

var _ csi.ControllerServer = (*Shared)(nil)

// NewShared returns the shared driver's controller service; c, reader and opts as for NewController.
func NewShared(c client.Client, reader client.Reader, opts Options) *Shared {
	n := NewController(c, reader, opts)
	clk := opts.Clock
	if clk == nil {
		clk = clock.RealClock{}
	}
	return &Shared{client: c, names: opts.Names, minimum: n.minimum, volumes: n.volumes, clock: clk, admission: opts.Admission}
}

// ControllerGetCapabilities implements csi.ControllerServer: no snapshots or clones (linear LVs).
func (s *Shared) ControllerGetCapabilities(context.Context, *csi.ControllerGetCapabilitiesRequest) (*csi.ControllerGetCapabilitiesResponse, error) {
	var caps []*csi.ControllerServiceCapability
	for _, c := range []csi.ControllerServiceCapability_RPC_Type{
		csi.ControllerServiceCapability_RPC_CREATE_DELETE_VOLUME,
		csi.ControllerServiceCapability_RPC_GET_CAPACITY,
		csi.ControllerServiceCapability_RPC_EXPAND_VOLUME,
	} {
		caps = append(caps, &csi.ControllerServiceCapability{Type: &csi.ControllerServiceCapability_Rpc{
			Rpc: &csi.ControllerServiceCapability_RPC{Type: c}}})
	}
	return &csi.ControllerGetCapabilitiesResponse{Capabilities: caps}, nil
}

func validateSharedCapabilities(caps []*csi.VolumeCapability) error {
	if len(caps) == 0 {
		return status.Error(codes.InvalidArgument, "volume_capabilities is required")
	}
	for _, c := range caps {
		if _, err := sharedcsinode.Activation(c); err != nil {
			return status.Error(codes.InvalidArgument, err.Error())
		}
	}
	return nil
}

// member is one node's view of a shared volume group, from its LVMNode status.
type member struct {
	node   string
	joined bool
	free   int64
	active map[string]lvmv2.SharedActivationMode
}

// lockspace is a shared volume group and its nodes.
type lockspace struct {
	namespace, vg string
	members       []member
}

func (l *lockspace) joined() []string {
	var out []string
	for _, m := range l.members {
		if m.joined {
			out = append(out, m.node)
		}
	}
	return out
}

// free is what the joined nodes report free in the volume group (they read the same metadata; the
// largest report is the newest after a removal, the smallest after a creation: the smallest is safe).
func (l *lockspace) free() int64 {
	free := int64(-1)
	for _, m := range l.members {
		if m.joined && (free < 0 || m.free < free) {
			free = m.free
		}
	}
	return max(free, 0)
}

// activeOn lists where volume id is active, "node (Mode)" each.
func (l *lockspace) activeOn(id string) []string {
	var out []string
	for _, m := range l.members {
		if mode, ok := m.active[id]; ok {
			out = append(out, fmt.Sprintf("%s (%s)", m.node, mode))
		}
	}
	return out
}

// worker picks the node whose agent does a volume's work: a joined node, spread by the volume's name.
func (l *lockspace) worker(name string) (string, error) {
	nodes := l.joined()
	if len(nodes) == 0 {
		return "", status.Errorf(codes.Unavailable, "no node has joined the lockspace of shared volume group %s yet: each LVMNode's status says why (lock managers, host ID, LUN)", l.vg)
	}
	h := fnv.New32a()
	_, _ = h.Write([]byte(name))
	return nodes[int(h.Sum32()%uint32(len(nodes)))], nil
}

// lookupClass finds the Shared volume group behind a device class and its nodes.
func (s *Shared) lookupClass(ctx context.Context, deviceClass string) (*lockspace, error) {
	if deviceClass == "" {
		return nil, status.Errorf(codes.InvalidArgument, "the StorageClass names no device class (%s)", s.names.DeviceClassParam())
	}
	sets := &lvmv2.LVMNodeSetList{}
	if err := s.client.List(ctx, sets); err != nil {
		return nil, status.Errorf(codes.Internal, "list LVMNodeSets: %v", err)
	}
	var found []lockspace
	for _, set := range sets.Items {
		for _, dc := range set.Spec.Template.DeviceClasses {
			if dc.Name != deviceClass {
				continue
			}
			for _, vg := range set.Spec.Template.VolumeGroups {
				if vg.Name == dc.VolumeGroup && vg.AccessPolicy == lvmv2.AccessPolicyShared {
					found = append(found, lockspace{namespace: set.Namespace, vg: vg.Name})
				}
			}
		}
	}
	switch len(found) {
	case 0:
		return nil, status.Errorf(codes.InvalidArgument, "device class %q is not a device class of a Shared volume group in any LVMNodeSet", deviceClass)
	case 1:
	default:
		return nil, status.Errorf(codes.InvalidArgument, "device class %q names a Shared volume group in %d LVMNodeSets: give each set's shared device class its own name", deviceClass, len(found))
	}
	l := &found[0]
	return l, s.readMembers(ctx, l)
}

// readMembers reads every LVMNode's view of the volume group.
func (s *Shared) readMembers(ctx context.Context, l *lockspace) error {
	nodes := &lvmv2.LVMNodeList{}
	if err := s.client.List(ctx, nodes, client.InNamespace(l.namespace)); err != nil {
		return status.Errorf(codes.Internal, "list LVMNodes: %v", err)
	}
	for _, n := range nodes.Items {
		for _, vg := range n.Status.VolumeGroups {
			if vg.Name != l.vg {
				continue
			}
			alive, err := s.alive(ctx, &n)
			if err != nil {
				return err
			}
			m := member{node: n.Name, joined: alive && vg.Lockspace == lvmv2.LockspaceJoined && n.DeletionTimestamp.IsZero(), active: map[string]lvmv2.SharedActivationMode{}}
			// A node dead for sanlock holds no lock any more: what its last status says is active is not.
			if alive {
				if vg.Free != nil {
					m.free = vg.Free.Value()
				}
				for _, a := range vg.ActiveVolumes {
					m.active[a.Name] = a.Mode
				}
			}
			l.members = append(l.members, m)
		}
	}
	slices.SortFunc(l.members, func(a, b member) int { return strings.Compare(a.node, b.node) })
	return nil
}

// alive reports whether the node is alive for sanlock: it renews its host-ID Lease. A node whose Lease
// went unrenewed for the host-dead time, or went to another node, is dead: its locks are free, its status
// stale. A node without a host ID yet is alive (it holds no lock either).
func (s *Shared) alive(ctx context.Context, n *lvmv2.LVMNode) (bool, error) {
	sl := n.Status.SharedLocking
	if sl == nil || sl.HostID == 0 {
		return true, nil
	}
	l := &coordinationv1.Lease{}
	err := s.client.Get(ctx, client.ObjectKey{Namespace: n.Namespace, Name: hostid.Name(int(sl.HostID))}, l)
	switch {
	case apierrors.IsNotFound(err):
		return false, nil
	case err != nil:
		return false, status.Errorf(codes.Internal, "get the host-ID Lease of node %s: %v", n.Name, err)
	}
	return hostid.Holder(l) == n.Name && !hostid.Dead(l, s.clock.Now()), nil
}

// CreateVolume implements csi.ControllerServer.
func (s *Shared) CreateVolume(ctx context.Context, req *csi.CreateVolumeRequest) (*csi.CreateVolumeResponse, error) {
	if req.GetName() == "" {
		return nil, status.Error(codes.InvalidArgument, "name is required")
	}
	if err := validateSharedCapabilities(req.GetVolumeCapabilities()); err != nil {
		return nil, err
	}
	if req.GetVolumeContentSource() != nil {
		return nil, status.Errorf(codes.InvalidArgument, "%s volumes are linear LVs without snapshots or clones: create the volume empty", driver.SharedDriver)
	}
	if s.admission != nil {
		if why := s.admission(); why != "" {
			return nil, status.Errorf(codes.FailedPrecondition, "new volumes on shared volume groups are refused: %s", why)
		}
	}
	name := strings.ToLower(req.GetName())
	defer s.nameLocks.lock(name)()
	size, err := requestSize(req.GetCapacityRange().GetRequiredBytes(), req.GetCapacityRange().GetLimitBytes(), s.minimum.For(req.GetVolumeCapabilities()))
	if err != nil {
		return nil, status.Error(codes.InvalidArgument, err.Error())
	}
	deviceClass := req.GetParameters()[s.names.DeviceClassParam()]
	ls, err := s.lookupClass(ctx, deviceClass)
	if err != nil {
		return nil, err
	}
	existing, err := s.volumes.byName(ctx, name)
	switch {
	case apierrors.IsNotFound(err):
		existing = nil
	case err != nil:
		return nil, status.Errorf(codes.Internal, "get LogicalVolume %s: %v", name, err)
	}
	if existing != nil {
		if !sharedvolumes.IsShared(existing) || existing.Spec.Size.Value() != size || existing.Annotations[driver.SharedVolumeGroupAnnotation] != ls.vg {
			return nil, status.Errorf(codes.AlreadyExists, "a volume named %s exists with a different size or volume group", name)
		}
		if err := s.ensureWorker(ctx, existing, ls); err != nil {
			return nil, err
		}
	} else {
		if free := ls.free(); free < size {
			return nil, status.Errorf(codes.ResourceExhausted, "shared volume group %s has %d bytes free, %d requested", ls.vg, free, size)
		}
		worker, err := ls.worker(name)
		if err != nil {
			return nil, err
		}
		lv := &topolvmv1.LogicalVolume{
			ObjectMeta: metav1.ObjectMeta{Name: name,
				Labels:      map[string]string{driver.CreatedByLabel: driver.CreatedByValue},
				Annotations: map[string]string{driver.SharedVolumeGroupAnnotation: ls.vg, driver.SharedWorkerAnnotation: worker},
				// The worker's agent removes it with the LV.
				Finalizers: []string{s.names.LogicalVolumeFinalizer()}},
			Spec: topolvmv1.LogicalVolumeSpec{Name: name, DeviceClass: deviceClass, Size: quantity(size)},
		}
		if err := s.client.Create(ctx, lv); err != nil && !apierrors.IsAlreadyExists(err) {
			return nil, status.Errorf(codes.Internal, "create LogicalVolume %s: %v", name, err)
		}
	}
	lv, err := s.volumes.waitProvisioned(ctx, name)
	if err != nil {
		return nil, err
	}
	return &csi.CreateVolumeResponse{Volume: &csi.Volume{VolumeId: lv.Status.VolumeID, CapacityBytes: lv.Status.CurrentSize.Value()}}, nil
}

// ensureWorker moves a volume's work to a joined node when its worker left the lockspace (or its LVMNode
// is gone), so that a dead node never holds a creation, expansion or removal up.
func (s *Shared) ensureWorker(ctx context.Context, lv *topolvmv1.LogicalVolume, ls *lockspace) error {
	if slices.Contains(ls.joined(), lv.Annotations[driver.SharedWorkerAnnotation]) {
		return nil
	}
	worker, err := ls.worker(lv.Name)
	if err != nil {
		return err
	}
	base := lv.DeepCopy()
	lv.Annotations[driver.SharedWorkerAnnotation] = worker
	if err := s.client.Patch(ctx, lv, client.MergeFromWithOptions(base, client.MergeFromWithOptimisticLock{})); err != nil {
		return status.Errorf(codes.Internal, "hand LogicalVolume %s to node %s: %v", lv.Name, worker, err)
	}
	return nil
}

// sharedVolume finds a shared volume by ID and its volume group's nodes; nil when it does not exist.
func (s *Shared) sharedVolume(ctx context.Context, id string) (*topolvmv1.LogicalVolume, *lockspace, error) {
	lv, err := s.volumes.byVolumeID(ctx, id)
	if err != nil || lv == nil {
		return nil, nil, err
	}
	if !sharedvolumes.IsShared(lv) {
		return nil, nil, status.Errorf(codes.InvalidArgument, "volume %s is not a %s volume", id, driver.SharedDriver)
	}
	ls, err := s.lookupClass(ctx, lv.Spec.DeviceClass)
	if err != nil {
		return nil, nil, err
	}
	if ls.vg != lv.Annotations[driver.SharedVolumeGroupAnnotation] {
		return nil, nil, status.Errorf(codes.FailedPrecondition, "volume %s is in shared volume group %s, but its device class %q now names %s",
			id, lv.Annotations[driver.SharedVolumeGroupAnnotation], lv.Spec.DeviceClass, ls.vg)
	}
	return lv, ls, nil
}

// DeleteVolume implements csi.ControllerServer: refused while any node has the volume active.
func (s *Shared) DeleteVolume(ctx context.Context, req *csi.DeleteVolumeRequest) (*csi.DeleteVolumeResponse, error) {
	id := req.GetVolumeId()
	if id == "" {
		return nil, status.Error(codes.InvalidArgument, "volume_id is required")
	}
	defer s.ids.lock(id)()
	lv, ls, err := s.sharedVolume(ctx, id)
	if err != nil || lv == nil {
		return &csi.DeleteVolumeResponse{}, err
	}
	if on := ls.activeOn(id); len(on) > 0 {
		return nil, status.Errorf(codes.FailedPrecondition, "volume %s is active on %s: it is removed once every node has unstaged it (stop the pods or VMs that use it)", id, strings.Join(on, ", "))
	}
	if err := s.ensureWorker(ctx, lv, ls); err != nil {
		return nil, err
	}
	if err := s.volumes.deleteAndWait(ctx, lv); err != nil {
		return nil, err
	}
	return &csi.DeleteVolumeResponse{}, nil
}

// ControllerExpandVolume implements csi.ControllerServer: offline only. A file system grows when the
// volume is next published (the node service checks), so no node expansion is asked for.
func (s *Shared) ControllerExpandVolume(ctx context.Context, req *csi.ControllerExpandVolumeRequest) (*csi.ControllerExpandVolumeResponse, error) {
	size, err := expandRequest(req)
	if err != nil {
		return nil, err
	}
	id := req.GetVolumeId()
	defer s.ids.lock(id)()
	lv, ls, err := s.sharedVolume(ctx, id)
	if err != nil {
		return nil, err
	}
	if lv == nil {
		return nil, status.Errorf(codes.NotFound, "volume %s not found", id)
	}
	var current int64
	if lv.Status.CurrentSize != nil {
		current = lv.Status.CurrentSize.Value()
	}
	if size <= current {
		return &csi.ControllerExpandVolumeResponse{CapacityBytes: current}, nil
	}
	if on := ls.activeOn(id); len(on) > 0 {
		return nil, status.Errorf(codes.FailedPrecondition, "volume %s is active on %s: shared volumes grow offline; stop the pods or VMs that use it and the expansion goes on", id, strings.Join(on, ", "))
	}
	if free := ls.free(); free < size-current {
		return nil, status.Errorf(codes.ResourceExhausted, "shared volume group %s has %d bytes free; growing volume %s needs %d more", ls.vg, free, id, size-current)
	}
	if err := s.ensureWorker(ctx, lv, ls); err != nil {
		return nil, err
	}
	grown, err := s.volumes.grow(ctx, lv.Name, size, s.names.ResizeRequestedAt())
	if err != nil {
		return nil, err
	}
	return &csi.ControllerExpandVolumeResponse{CapacityBytes: grown.Status.CurrentSize.Value()}, nil
}

// ValidateVolumeCapabilities implements csi.ControllerServer.
func (s *Shared) ValidateVolumeCapabilities(ctx context.Context, req *csi.ValidateVolumeCapabilitiesRequest) (*csi.ValidateVolumeCapabilitiesResponse, error) {
	return validateVolumeCapabilities(req, func() (bool, error) {
		lv, _, err := s.sharedVolume(ctx, req.GetVolumeId())
		return lv != nil, err
	}, validateSharedCapabilities)
}

// GetCapacity implements csi.ControllerServer: the volume group's free space as its nodes report it (0
// before any node joined); the topology, if any, does not matter.
func (s *Shared) GetCapacity(ctx context.Context, req *csi.GetCapacityRequest) (*csi.GetCapacityResponse, error) {
	ls, err := s.lookupClass(ctx, req.GetParameters()[s.names.DeviceClassParam()])
	if err != nil {
		return nil, err
	}
	return &csi.GetCapacityResponse{AvailableCapacity: ls.free()}, nil
}

// Capacity is the free space of the Shared volume group behind a device class and the nodes in its
// lockspace, for CSIStorageCapacity.
func (s *Shared) Capacity(ctx context.Context, deviceClass string) (free int64, joined []string, err error) {
	ls, err := s.lookupClass(ctx, deviceClass)
	if err != nil {
		return 0, nil, err
	}
	return ls.free(), ls.joined(), nil
}
