package csicontroller

import (
	"context"
	"strings"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/lvms-dev/lvms/api/topolvm/driver"
	topolvmv1 "github.com/lvms-dev/lvms/api/topolvm/v1"
)

// Options configure the controller service.
type Options struct {
	// Names selects topolvm.io or the legacy group.
	Names driver.Names
	// MinimumAllocation; zero value means DefaultMinimumAllocation.
	MinimumAllocation *MinimumAllocation
	// Backoff for waiting on the node; zero value means DefaultBackoff.
	Backoff Backoff
	// Clock decides whether a node of a shared volume group is dead (its host-ID Lease unrenewed); nil
	// means the real clock.
	Clock clock.PassiveClock
	// Admission, when set, says why no new shared volume may be made ("" when it may): the admission policy
	// that confines the node agents, which hold the shared volume groups' Leases and create their volumes, is
	// not in place (operator/admission). Only the shared driver asks.
	Admission func() string
}

// Controller is the CSI Controller service.
type Controller struct {
	csi.UnimplementedControllerServer

	client    client.Client
	names     driver.Names
	minimum   MinimumAllocation
	volumes   *volumes
	nameLocks keyLocks // per CSI name
	ids       keyLocks // per volume ID
}

var _ csi.ControllerServer = (*Controller)(nil)

// NewController returns the controller service. c may be a cached client; reader (the API reader) is
// used when the cache has not seen an object yet, and may be nil when c reads the API directly.
func NewController(c client.Client, reader client.Reader, opts Options) *Controller {
	minimum := DefaultMinimumAllocation()
	if opts.MinimumAllocation != nil {
		minimum = *opts.MinimumAllocation
	}
	b := opts.Backoff
	if b.Initial <= 0 {
		b = DefaultBackoff()
	}
	return &Controller{client: c, names: opts.Names, minimum: minimum, volumes: &volumes{client: c, reader: reader, backoff: b}}
}

// ControllerGetCapabilities implements csi.ControllerServer.
func (s *Controller) ControllerGetCapabilities(context.Context, *csi.ControllerGetCapabilitiesRequest) (*csi.ControllerGetCapabilitiesResponse, error) {
	var caps []*csi.ControllerServiceCapability
	for _, c := range []csi.ControllerServiceCapability_RPC_Type{
		csi.ControllerServiceCapability_RPC_CREATE_DELETE_VOLUME,
		csi.ControllerServiceCapability_RPC_CLONE_VOLUME,
		csi.ControllerServiceCapability_RPC_GET_CAPACITY,
		csi.ControllerServiceCapability_RPC_EXPAND_VOLUME,
		csi.ControllerServiceCapability_RPC_CREATE_DELETE_SNAPSHOT,
	} {
		caps = append(caps, &csi.ControllerServiceCapability{Type: &csi.ControllerServiceCapability_Rpc{
			Rpc: &csi.ControllerServiceCapability_RPC{Type: c}}})
	}
	return &csi.ControllerGetCapabilitiesResponse{Capabilities: caps}, nil
}

// validateCapabilities checks that every capability is Block or Mount with SINGLE_NODE_WRITER.
func validateCapabilities(caps []*csi.VolumeCapability) error {
	if len(caps) == 0 {
		return status.Error(codes.InvalidArgument, "volume_capabilities is required")
	}
	for _, c := range caps {
		if c.GetBlock() == nil && c.GetMount() == nil {
			return status.Error(codes.InvalidArgument, "every volume capability must be block or mount")
		}
		if m := c.GetAccessMode().GetMode(); m != csi.VolumeCapability_AccessMode_SINGLE_NODE_WRITER {
			return status.Errorf(codes.InvalidArgument, "access mode %s is not supported: TopoLVM volumes are single-node (ReadWriteOnce or ReadWriteOncePod)", m)
		}
	}
	return nil
}

// CreateVolume implements csi.ControllerServer.
func (s *Controller) CreateVolume(ctx context.Context, req *csi.CreateVolumeRequest) (*csi.CreateVolumeResponse, error) {
	if req.GetName() == "" {
		return nil, status.Error(codes.InvalidArgument, "name is required")
	}
	if err := validateCapabilities(req.GetVolumeCapabilities()); err != nil {
		return nil, err
	}
	name := strings.ToLower(req.GetName())
	defer s.nameLocks.lock(name)()

	params := req.GetParameters()
	deviceClass := params[s.names.DeviceClassParam()]
	size, err := requestSize(req.GetCapacityRange().GetRequiredBytes(), req.GetCapacityRange().GetLimitBytes(), s.minimum.For(req.GetVolumeCapabilities()))
	if err != nil {
		return nil, status.Error(codes.InvalidArgument, err.Error())
	}
	spec := topolvmv1.LogicalVolumeSpec{Name: name, DeviceClass: deviceClass, LvcreateOptionClass: params[s.names.OptionClassParam()], Size: quantity(size)}

	if src := req.GetVolumeContentSource(); src != nil {
		if err := s.fromSource(ctx, req, src, &spec); err != nil {
			return nil, err
		}
	} else if spec.NodeName, err = s.pickNode(ctx, req.GetAccessibilityRequirements(), deviceClass, size); err != nil {
		return nil, err
	}

	lv, err := s.createLogicalVolume(ctx, spec)
	if err != nil {
		return nil, err
	}
	return &csi.CreateVolumeResponse{Volume: &csi.Volume{
		VolumeId:           lv.Status.VolumeID,
		CapacityBytes:      lv.Status.CurrentSize.Value(),
		ContentSource:      req.GetVolumeContentSource(),
		AccessibleTopology: []*csi.Topology{{Segments: map[string]string{s.names.TopologyKey(): lv.Spec.NodeName}}},
	}}, nil
}

// pickNode chooses the node: the one with the most capacity when no requirements are given (the
// Kubernetes scheduler always gives them; csi-sanity does not), otherwise the first preferred, then
// requisite, segment with the topology key.
func (s *Controller) pickNode(ctx context.Context, req *csi.TopologyRequirement, deviceClass string, size int64) (string, error) {
	if req == nil {
		node, capacity, err := s.nodeWithMostCapacity(ctx, deviceClass)
		if err != nil {
			return "", err
		}
		if capacity < size {
			return "", status.Errorf(codes.ResourceExhausted, "no node has %d bytes free in device class %q: the most is %d bytes on node %q",
				size, className(deviceClass), capacity, node)
		}
		return node, nil
	}
	for _, list := range [][]*csi.Topology{req.GetPreferred(), req.GetRequisite()} {
		for _, t := range list {
			if node, ok := t.GetSegments()[s.names.TopologyKey()]; ok && node != "" {
				if err := s.client.Get(ctx, types.NamespacedName{Name: node}, &corev1.Node{}); apierrors.IsNotFound(err) {
					// Rescheduling is the way out, as for a node without space.
					return "", status.Errorf(codes.ResourceExhausted, "node %q does not exist", node)
				} else if err != nil {
					return "", status.Errorf(codes.Internal, "get node %q: %v", node, err)
				}
				return node, nil
			}
		}
	}
	return "", status.Errorf(codes.InvalidArgument, "cannot find key %q in accessibility_requirements", s.names.TopologyKey())
}

func className(dc string) string {
	if dc == "" {
		return driver.DefaultDeviceClassKey
	}
	return dc
}

// fromSource fills spec for a clone or a snapshot restore: same node and device class as the source,
// at least its size.
func (s *Controller) fromSource(ctx context.Context, req *csi.CreateVolumeRequest, src *csi.VolumeContentSource, spec *topolvmv1.LogicalVolumeSpec) error {
	var id string
	switch {
	case src.GetSnapshot() != nil:
		id = src.GetSnapshot().GetSnapshotId()
	case src.GetVolume() != nil:
		id = src.GetVolume().GetVolumeId()
	default:
		return status.Error(codes.InvalidArgument, "volume_content_source must be a snapshot or a volume")
	}
	source, err := s.volumes.byVolumeID(ctx, id)
	if err != nil {
		return err
	}
	if source == nil {
		return status.Errorf(codes.NotFound, "source %s not found", id)
	}
	if source.Status.CurrentSize != nil && spec.Size.Cmp(*source.Status.CurrentSize) < 0 {
		return status.Errorf(codes.OutOfRange, "requested size %s is smaller than the source's %s", spec.Size.String(), source.Status.CurrentSize.String())
	}
	if source.Spec.DeviceClass != spec.DeviceClass {
		return status.Errorf(codes.InvalidArgument, "device class %q differs from the source's %q: restore and clone into the source's device class",
			className(spec.DeviceClass), className(source.Spec.DeviceClass))
	}
	if reqs := req.GetAccessibilityRequirements(); reqs != nil && !topologyHas(reqs, s.names.TopologyKey(), source.Spec.NodeName) {
		return status.Errorf(codes.InvalidArgument, "the source is on node %q, which the accessibility requirements do not allow: "+
			"a restore or clone is made on its source's node, so a pod that uses it must run there (nodeSelector kubernetes.io/hostname: %s)",
			source.Spec.NodeName, source.Spec.NodeName)
	}
	spec.NodeName, spec.Source, spec.AccessType = source.Spec.NodeName, source.Name, "rw"
	return nil
}

func topologyHas(req *csi.TopologyRequirement, key, node string) bool {
	for _, list := range [][]*csi.Topology{req.GetPreferred(), req.GetRequisite()} {
		for _, t := range list {
			if t.GetSegments()[key] == node {
				return true
			}
		}
	}
	return false
}

// createLogicalVolume creates the object (or finds a compatible one from an earlier call) and waits for
// the node's answer.
func (s *Controller) createLogicalVolume(ctx context.Context, spec topolvmv1.LogicalVolumeSpec) (*topolvmv1.LogicalVolume, error) {
	lv := &topolvmv1.LogicalVolume{ObjectMeta: metav1.ObjectMeta{Name: spec.Name}, Spec: spec}
	err := s.client.Create(ctx, lv)
	if apierrors.IsAlreadyExists(err) {
		existing, gerr := s.volumes.byName(ctx, spec.Name)
		if gerr != nil {
			return nil, status.Errorf(codes.Internal, "get LogicalVolume %s: %v", spec.Name, gerr)
		}
		if existing.Spec.Name != spec.Name || existing.Spec.Source != spec.Source || existing.Spec.Size.Cmp(spec.Size) != 0 {
			return nil, status.Errorf(codes.AlreadyExists, "a volume named %s exists with a different size or source", spec.Name)
		}
	} else if err != nil {
		return nil, status.Errorf(codes.Internal, "create LogicalVolume %s: %v", spec.Name, err)
	}
	return s.volumes.waitProvisioned(ctx, spec.Name)
}

// DeleteVolume implements csi.ControllerServer; a volume that does not exist is deleted already.
func (s *Controller) DeleteVolume(ctx context.Context, req *csi.DeleteVolumeRequest) (*csi.DeleteVolumeResponse, error) {
	if err := s.deleteByID(ctx, req.GetVolumeId(), "volume_id"); err != nil {
		return nil, err
	}
	return &csi.DeleteVolumeResponse{}, nil
}

func (s *Controller) deleteByID(ctx context.Context, id, field string) error {
	if id == "" {
		return status.Errorf(codes.InvalidArgument, "%s is required", field)
	}
	defer s.ids.lock(id)()
	lv, err := s.volumes.byVolumeID(ctx, id)
	if err != nil || lv == nil {
		return err
	}
	return s.volumes.deleteAndWait(ctx, lv)
}

// ValidateVolumeCapabilities implements csi.ControllerServer.
func (s *Controller) ValidateVolumeCapabilities(ctx context.Context, req *csi.ValidateVolumeCapabilitiesRequest) (*csi.ValidateVolumeCapabilitiesResponse, error) {
	return validateVolumeCapabilities(req, func() (bool, error) {
		lv, err := s.volumes.byVolumeID(ctx, req.GetVolumeId())
		return lv != nil, err
	}, validateCapabilities)
}

// validateVolumeCapabilities is ValidateVolumeCapabilities for both drivers: the request checked, the volume
// looked up (exists), the capabilities confirmed or the reason they are not (validate).
func validateVolumeCapabilities(req *csi.ValidateVolumeCapabilitiesRequest, exists func() (bool, error), validate func([]*csi.VolumeCapability) error) (*csi.ValidateVolumeCapabilitiesResponse, error) {
	if req.GetVolumeId() == "" {
		return nil, status.Error(codes.InvalidArgument, "volume_id is required")
	}
	if len(req.GetVolumeCapabilities()) == 0 {
		return nil, status.Error(codes.InvalidArgument, "volume_capabilities is required")
	}
	found, err := exists()
	if err != nil {
		return nil, err
	}
	if !found {
		return nil, status.Errorf(codes.NotFound, "volume %s not found", req.GetVolumeId())
	}
	if err := validate(req.GetVolumeCapabilities()); err != nil {
		return &csi.ValidateVolumeCapabilitiesResponse{Message: status.Convert(err).Message()}, nil
	}
	return &csi.ValidateVolumeCapabilitiesResponse{Confirmed: &csi.ValidateVolumeCapabilitiesResponse_Confirmed{
		VolumeContext: req.GetVolumeContext(), VolumeCapabilities: req.GetVolumeCapabilities(), Parameters: req.GetParameters(),
	}}, nil
}

// GetCapacity implements csi.ControllerServer: the node's capacity annotation for the segment, or the sum
// over all nodes without one. Unknown nodes and device classes have 0 bytes.
func (s *Controller) GetCapacity(ctx context.Context, req *csi.GetCapacityRequest) (*csi.GetCapacityResponse, error) {
	dc := req.GetParameters()[s.names.DeviceClassParam()]
	var capacity int64
	var err error
	if t := req.GetAccessibleTopology(); t == nil {
		capacity, err = s.totalCapacity(ctx, dc)
	} else {
		capacity, err = s.capacityOfSegment(ctx, t.GetSegments(), dc)
	}
	if err != nil {
		return nil, err
	}
	return &csi.GetCapacityResponse{AvailableCapacity: capacity}, nil
}
