package csicontroller

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"slices"
	"strings"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/timestamppb"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation"
	"sigs.k8s.io/controller-runtime/pkg/client"

	topolvmv1 "github.com/lvms-dev/lvms/api/topolvm/v1"
)

// maxGroupMembers bounds a group: its node agent suspends every member at once (nodeagent/groupsnapshot).
const maxGroupMembers = 32

// GroupController is the CSI GroupController service: crash-consistent group snapshots of thin volumes of
// one device class on one node. A group is a LogicalVolumeGroupSnapshot (its ID is the object's name) and
// one snapshot LogicalVolume per member, labelled with the group's name, which the node agent takes together;
// each member is then a snapshot like any other (restore, delete).
type GroupController struct {
	csi.UnimplementedGroupControllerServer
	c *Controller
}

var _ csi.GroupControllerServer = (*GroupController)(nil)

// NewGroupController returns the GroupController service over the controller service's client.
func NewGroupController(c *Controller) *GroupController { return &GroupController{c: c} }

// GroupControllerGetCapabilities implements csi.GroupControllerServer.
func (g *GroupController) GroupControllerGetCapabilities(context.Context, *csi.GroupControllerGetCapabilitiesRequest) (*csi.GroupControllerGetCapabilitiesResponse, error) {
	return &csi.GroupControllerGetCapabilitiesResponse{Capabilities: []*csi.GroupControllerServiceCapability{{
		Type: &csi.GroupControllerServiceCapability_Rpc{Rpc: &csi.GroupControllerServiceCapability_RPC{
			Type: csi.GroupControllerServiceCapability_RPC_CREATE_DELETE_GET_VOLUME_GROUP_SNAPSHOT}}}}}, nil
}

// memberName is the name of the snapshot LogicalVolume of source in group: the group's name and a hash of
// the source's, so a retry finds the same members.
func memberName(group, source string) string {
	sum := sha256.Sum256([]byte(source))
	suffix := "-" + hex.EncodeToString(sum[:8])
	return group[:min(len(group), 253-len(suffix))] + suffix
}

// CreateVolumeGroupSnapshot implements csi.GroupControllerServer. Sources on different nodes, in different
// device classes or on a shared volume group are refused with FailedPrecondition before anything is
// created; a group the node refuses (a thick device class, different thin pools) or fails to take is
// removed with its members, never left partial.
func (g *GroupController) CreateVolumeGroupSnapshot(ctx context.Context, req *csi.CreateVolumeGroupSnapshotRequest) (*csi.CreateVolumeGroupSnapshotResponse, error) {
	if req.GetName() == "" {
		return nil, status.Error(codes.InvalidArgument, "name is required")
	}
	ids := req.GetSourceVolumeIds()
	switch {
	case len(ids) == 0:
		return nil, status.Error(codes.InvalidArgument, "source_volume_ids is required")
	case len(ids) > maxGroupMembers:
		return nil, status.Errorf(codes.InvalidArgument, "%d source volumes: at most %d can be snapshotted together; split the group", len(ids), maxGroupMembers)
	}
	name := strings.ToLower(req.GetName())
	defer g.c.nameLocks.lock(name)()
	sources, err := g.sources(ctx, ids)
	if err != nil {
		return nil, err
	}
	if err := checkGroup(sources); err != nil {
		return nil, err
	}
	spec := topolvmv1.LogicalVolumeGroupSnapshotSpec{NodeName: sources[0].Spec.NodeName, DeviceClass: sources[0].Spec.DeviceClass}
	for _, s := range sources {
		spec.Members = append(spec.Members, topolvmv1.GroupSnapshotMember{Source: s.Name, Snapshot: memberName(name, s.Name)})
	}
	slices.SortFunc(spec.Members, func(a, b topolvmv1.GroupSnapshotMember) int { return strings.Compare(a.Source, b.Source) })

	existing, err := g.group(ctx, name)
	if err != nil {
		return nil, err
	}
	if existing != nil && !equalSpec(existing.Spec, spec) {
		return nil, status.Errorf(codes.AlreadyExists, "a group snapshot named %s exists with other source volumes", name)
	}
	if existing == nil {
		for _, s := range sources {
			if err := g.createMember(ctx, name, s); err != nil {
				return nil, err
			}
		}
		obj := &topolvmv1.LogicalVolumeGroupSnapshot{ObjectMeta: metav1.ObjectMeta{Name: name, Annotations: takenFor(req.GetParameters())}, Spec: spec}
		if err := g.c.client.Create(ctx, obj); err != nil && !apierrors.IsAlreadyExists(err) {
			return nil, status.Errorf(codes.Internal, "create LogicalVolumeGroupSnapshot %s: %v", name, err)
		}
	}
	done, err := g.wait(ctx, name)
	if err != nil {
		return nil, err
	}
	out, err := g.response(ctx, done)
	if err != nil {
		return nil, err
	}
	return &csi.CreateVolumeGroupSnapshotResponse{GroupSnapshot: out}, nil
}

// sources resolves each source volume ID to its LogicalVolume, in request order.
func (g *GroupController) sources(ctx context.Context, ids []string) ([]*topolvmv1.LogicalVolume, error) {
	var out []*topolvmv1.LogicalVolume
	seen := map[string]bool{}
	for _, id := range ids {
		if id == "" {
			return nil, status.Error(codes.InvalidArgument, "source_volume_ids has an empty ID")
		}
		if seen[id] {
			return nil, status.Errorf(codes.InvalidArgument, "source volume %s is named twice", id)
		}
		seen[id] = true
		lv, err := g.c.volumes.byVolumeID(ctx, id)
		if err != nil {
			return nil, err
		}
		if lv == nil {
			return nil, status.Errorf(codes.NotFound, "source volume %s not found", id)
		}
		out = append(out, lv)
	}
	return out, nil
}

// checkGroup refuses sources that cannot be snapshotted together, naming them.
func checkGroup(sources []*topolvmv1.LogicalVolume) error {
	var shared, byNode, byClass []string
	first := sources[0]
	for _, s := range sources {
		id := s.Status.VolumeID
		switch {
		case s.Spec.NodeName == "":
			shared = append(shared, id)
		case s.Spec.NodeName != first.Spec.NodeName:
			byNode = append(byNode, fmt.Sprintf("%s (node %s)", id, s.Spec.NodeName))
		case s.Spec.DeviceClass != first.Spec.DeviceClass:
			byClass = append(byClass, fmt.Sprintf("%s (device class %s)", id, className(s.Spec.DeviceClass)))
		}
		if s.Spec.Source != "" && s.Spec.AccessType == "ro" {
			return status.Errorf(codes.FailedPrecondition, "volume %s is a snapshot; a group snapshot takes volumes, not snapshots", id)
		}
	}
	switch {
	case len(shared) > 0:
		return status.Errorf(codes.FailedPrecondition, "volumes %s are on a shared volume group; group snapshots take thin volumes of one node", strings.Join(shared, ", "))
	case len(byNode) > 0:
		return status.Errorf(codes.FailedPrecondition, "volumes %s are not on node %s like volume %s; a group snapshot needs every volume on one node: group the volumes of each node separately",
			strings.Join(byNode, ", "), first.Spec.NodeName, first.Status.VolumeID)
	case len(byClass) > 0:
		return status.Errorf(codes.FailedPrecondition, "volumes %s are not in device class %s like volume %s; a group snapshot needs every volume in one thin device class",
			strings.Join(byClass, ", "), className(first.Spec.DeviceClass), first.Status.VolumeID)
	}
	return nil
}

func equalSpec(a, b topolvmv1.LogicalVolumeGroupSnapshotSpec) bool {
	return a.NodeName == b.NodeName && a.DeviceClass == b.DeviceClass && slices.Equal(a.Members, b.Members)
}

// createMember creates the snapshot LogicalVolume of source for group, or checks the one a previous call made.
func (g *GroupController) createMember(ctx context.Context, group string, source *topolvmv1.LogicalVolume) error {
	name := memberName(group, source.Name)
	spec := topolvmv1.LogicalVolumeSpec{Name: name, NodeName: source.Spec.NodeName, DeviceClass: source.Spec.DeviceClass,
		Size: source.Spec.Size, Source: source.Name, AccessType: "ro"}
	if source.Status.CurrentSize != nil {
		spec.Size = *source.Status.CurrentSize
	}
	lv := &topolvmv1.LogicalVolume{ObjectMeta: metav1.ObjectMeta{Name: name,
		Labels: map[string]string{topolvmv1.GroupSnapshotMemberLabel: group}}, Spec: spec}
	err := g.c.client.Create(ctx, lv)
	if apierrors.IsAlreadyExists(err) {
		existing, gerr := g.c.volumes.byName(ctx, name)
		if gerr != nil {
			return status.Errorf(codes.Internal, "get LogicalVolume %s: %v", name, gerr)
		}
		if existing.Spec.Source != source.Name || existing.Labels[topolvmv1.GroupSnapshotMemberLabel] != group {
			return status.Errorf(codes.AlreadyExists, "LogicalVolume %s exists and is not group %s's snapshot of %s", name, group, source.Name)
		}
		return nil
	}
	if err != nil {
		return status.Errorf(codes.Internal, "create LogicalVolume %s: %v", name, err)
	}
	return nil
}

// group gets a LogicalVolumeGroupSnapshot; nil when there is none.
func (g *GroupController) group(ctx context.Context, name string) (*topolvmv1.LogicalVolumeGroupSnapshot, error) {
	obj := &topolvmv1.LogicalVolumeGroupSnapshot{}
	err := g.c.client.Get(ctx, types.NamespacedName{Name: name}, obj)
	if apierrors.IsNotFound(err) && g.c.volumes.reader != nil {
		err = g.c.volumes.reader.Get(ctx, types.NamespacedName{Name: name}, obj)
	}
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, status.Errorf(codes.Internal, "get LogicalVolumeGroupSnapshot %s: %v", name, err)
	}
	return obj, nil
}

// wait waits for the node's answer. A refused or failed group is removed with its members (so that a
// retry starts afresh) and its code returned: FailedPrecondition for a refusal, Unavailable when the
// volume group was too busy to suspend in time, Internal otherwise.
func (g *GroupController) wait(ctx context.Context, name string) (*topolvmv1.LogicalVolumeGroupSnapshot, error) {
	var out *topolvmv1.LogicalVolumeGroupSnapshot
	err := g.c.volumes.backoff.waitFor(ctx, "LogicalVolumeGroupSnapshot "+name+" to be taken by its node", func(ctx context.Context) error {
		obj, err := g.group(ctx, name)
		if err != nil {
			return err
		}
		if obj == nil {
			return status.Errorf(codes.Aborted, "LogicalVolumeGroupSnapshot %s was deleted while it was being taken; retry", name)
		}
		switch obj.Status.Phase {
		case topolvmv1.GroupSnapshotReady:
			out = obj
			return nil
		case topolvmv1.GroupSnapshotRefused, topolvmv1.GroupSnapshotFailed:
			code := codes.Internal
			switch {
			case obj.Status.Phase == topolvmv1.GroupSnapshotRefused:
				code = codes.FailedPrecondition
			case obj.Status.Reason == "SuspendDeadline":
				code = codes.Unavailable
			}
			if err := g.remove(ctx, name, obj); err != nil {
				return err
			}
			return status.Errorf(code, "node %s: %s", obj.Spec.NodeName, obj.Status.Message)
		}
		return errNotDone
	})
	return out, err
}

// response describes a taken group.
func (g *GroupController) response(ctx context.Context, obj *topolvmv1.LogicalVolumeGroupSnapshot) (*csi.VolumeGroupSnapshot, error) {
	out := &csi.VolumeGroupSnapshot{GroupSnapshotId: obj.Name, CreationTime: timestamppb.New(obj.CreationTimestamp.Time), ReadyToUse: true}
	for _, m := range obj.Spec.Members {
		snap, err := g.c.volumes.byName(ctx, m.Snapshot)
		if err != nil {
			return nil, status.Errorf(codes.Internal, "get member LogicalVolume %s of group %s: %v", m.Snapshot, obj.Name, err)
		}
		src, err := g.c.volumes.byName(ctx, m.Source)
		if err != nil {
			return nil, status.Errorf(codes.Internal, "get source LogicalVolume %s of group %s: %v", m.Source, obj.Name, err)
		}
		if snap.Status.VolumeID == "" || snap.Status.CurrentSize == nil {
			return nil, status.Errorf(codes.Internal, "member LogicalVolume %s of ready group %s has no volume", snap.Name, obj.Name)
		}
		out.Snapshots = append(out.Snapshots, &csi.Snapshot{SnapshotId: snap.Status.VolumeID, SourceVolumeId: src.Status.VolumeID,
			GroupSnapshotId: obj.Name, SizeBytes: snap.Status.CurrentSize.Value(), CreationTime: out.CreationTime, ReadyToUse: true})
	}
	return out, nil
}

// remove deletes a group's member snapshots (waiting until their node removed their LVs) and then the
// group. The members are the LogicalVolumes labelled with the group's name, which also finds members a
// call interrupted before it created the group object; only snapshots (a source, read-only) are deleted,
// never a source.
func (g *GroupController) remove(ctx context.Context, name string, obj *topolvmv1.LogicalVolumeGroupSnapshot) error {
	list := &topolvmv1.LogicalVolumeList{}
	if err := g.c.client.List(ctx, list, client.MatchingLabels{topolvmv1.GroupSnapshotMemberLabel: name}); err != nil {
		return status.Errorf(codes.Internal, "list the members of group snapshot %s: %v", name, err)
	}
	for i := range list.Items {
		lv := &list.Items[i]
		if lv.Spec.Source == "" || lv.Spec.AccessType != "ro" {
			continue // not a snapshot: left alone
		}
		if err := g.c.volumes.deleteAndWait(ctx, lv); err != nil {
			return err
		}
	}
	if obj == nil {
		return nil
	}
	if err := g.c.client.Delete(ctx, obj); err != nil && !apierrors.IsNotFound(err) {
		return status.Errorf(codes.Internal, "delete LogicalVolumeGroupSnapshot %s: %v", obj.Name, err)
	}
	return nil
}

// checkSnapshotIDs refuses snapshot IDs that name a volume outside the group (IDs of members deleted
// already are accepted).
func (g *GroupController) checkSnapshotIDs(ctx context.Context, obj *topolvmv1.LogicalVolumeGroupSnapshot, ids []string) error {
	for _, id := range ids {
		lv, err := g.c.volumes.byVolumeID(ctx, id)
		if err != nil {
			return err
		}
		if lv != nil && (lv.Labels[topolvmv1.GroupSnapshotMemberLabel] != obj.Name || !slices.ContainsFunc(obj.Spec.Members,
			func(m topolvmv1.GroupSnapshotMember) bool { return m.Snapshot == lv.Name })) {
			return status.Errorf(codes.InvalidArgument, "snapshot %s is not a member of group snapshot %s", id, obj.Name)
		}
	}
	return nil
}

// DeleteVolumeGroupSnapshot implements csi.GroupControllerServer: the members' snapshots, then the group.
// A group that does not exist is deleted already.
func (g *GroupController) DeleteVolumeGroupSnapshot(ctx context.Context, req *csi.DeleteVolumeGroupSnapshotRequest) (*csi.DeleteVolumeGroupSnapshotResponse, error) {
	id := req.GetGroupSnapshotId()
	if id == "" {
		return nil, status.Error(codes.InvalidArgument, "group_snapshot_id is required")
	}
	defer g.c.nameLocks.lock(id)()
	obj, err := g.group(ctx, id)
	if err != nil {
		return nil, err
	}
	if obj != nil {
		if err := g.checkSnapshotIDs(ctx, obj, req.GetSnapshotIds()); err != nil {
			return nil, err
		}
	}
	if err := g.remove(ctx, id, obj); err != nil {
		return nil, err
	}
	return &csi.DeleteVolumeGroupSnapshotResponse{}, nil
}

// GetVolumeGroupSnapshot implements csi.GroupControllerServer.
func (g *GroupController) GetVolumeGroupSnapshot(ctx context.Context, req *csi.GetVolumeGroupSnapshotRequest) (*csi.GetVolumeGroupSnapshotResponse, error) {
	id := req.GetGroupSnapshotId()
	if id == "" {
		return nil, status.Error(codes.InvalidArgument, "group_snapshot_id is required")
	}
	obj, err := g.group(ctx, id)
	if err != nil {
		return nil, err
	}
	if obj == nil {
		return nil, status.Errorf(codes.NotFound, "group snapshot %s not found", id)
	}
	if err := g.checkSnapshotIDs(ctx, obj, req.GetSnapshotIds()); err != nil {
		return nil, err
	}
	if obj.Status.Phase != topolvmv1.GroupSnapshotReady {
		return &csi.GetVolumeGroupSnapshotResponse{GroupSnapshot: &csi.VolumeGroupSnapshot{GroupSnapshotId: obj.Name,
			CreationTime: timestamppb.New(obj.CreationTimestamp.Time)}}, nil
	}
	out, err := g.response(ctx, obj)
	if err != nil {
		return nil, err
	}
	return &csi.GetVolumeGroupSnapshotResponse{GroupSnapshot: out}, nil
}

// takenFor keeps, of the request's parameters, the VolumeGroupSnapshot the group is taken for (shown by the
// console), when both are names; other parameters are not recorded.
func takenFor(params map[string]string) map[string]string {
	name := params[topolvmv1.ParameterVolumeGroupSnapshotName]
	ns := params[topolvmv1.ParameterVolumeGroupSnapshotNamespace]
	if len(validation.IsDNS1123Subdomain(name)) > 0 || len(validation.IsDNS1123Label(ns)) > 0 {
		return nil
	}
	return map[string]string{topolvmv1.AnnotationVolumeGroupSnapshotName: name, topolvmv1.AnnotationVolumeGroupSnapshotNamespace: ns}
}
