package console

import (
	"cmp"
	"context"
	"slices"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	lvmv1 "github.com/lvms-dev/lvms/api/lvm/v1alpha1"
	lvmv2 "github.com/lvms-dev/lvms/api/lvm/v2alpha1"
	topolvmv1 "github.com/lvms-dev/lvms/api/topolvm/v1"
)

// Source produces snapshots of the storage state. A live cluster and a support bundle both implement it.
type Source interface {
	// Snapshot returns the current state. Callers must not modify the returned objects: sources may share
	// them between callers.
	Snapshot(ctx context.Context) (*Snapshot, error)
}

// Notifier is implemented by sources whose state changes (a live cluster). Subscribe returns a channel that
// receives a value soon after the state changed (several changes may be coalesced into one value) and is
// closed when ctx is done.
type Notifier interface {
	Subscribe(ctx context.Context) <-chan struct{}
}

// SnapshotClass is the part of a VolumeSnapshotClass the console shows (the CRD is not ours, so it is read
// without Go types).
type SnapshotClass struct {
	Name           string `json:"name"`
	Driver         string `json:"driver"`
	DeletionPolicy string `json:"deletionPolicy"`
}

// HiddenKind is a kind of object the caller may not read: the views leave it out and say so.
type HiddenKind struct {
	// Resource is the plural resource name with its group, for example "events" or "lvmnodes.lvm.topolvm.io".
	Resource string `json:"resource"`
	// Reason says why, in a sentence.
	Reason string `json:"reason"`
}

// Snapshot is the state of one cluster at one time: typed lists of every object the console reads, each
// sorted by namespace and name.
type Snapshot struct {
	// At is when the snapshot was taken.
	At time.Time
	// Cluster names the cluster (kubeconfig context or API server), for display.
	Cluster string
	// User is who the snapshot was read as, when known.
	User string
	// Installed is false when the cluster serves none of the LVMS APIs (no CRDs).
	Installed bool
	// Hidden lists the kinds the caller may not read.
	Hidden []HiddenKind

	LVMNodeSets     []lvmv2.LVMNodeSet
	LVMNodes        []lvmv2.LVMNode
	LVMClusters     []lvmv1.LVMCluster
	LVMVolumeGroups []lvmv1.LVMVolumeGroup
	NodeStatuses    []lvmv1.LVMVolumeGroupNodeStatus
	LogicalVolumes  []topolvmv1.LogicalVolume
	// GroupSnapshots are the LogicalVolumeGroupSnapshots; empty on a cluster that does not serve them.
	GroupSnapshots []topolvmv1.LogicalVolumeGroupSnapshot
	PVs            []corev1.PersistentVolume
	PVCs           []corev1.PersistentVolumeClaim
	Pods           []corev1.Pod
	StorageClasses []storagev1.StorageClass
	// StorageCapacities are the CSIStorageCapacity objects the provisioner publishes (capacity per class and node).
	StorageCapacities []storagev1.CSIStorageCapacity
	SnapshotClasses   []SnapshotClass
	Nodes             []corev1.Node
	Events            []corev1.Event

	// cache holds the views computed from this snapshot (see cached).
	cache *viewCache
}

// viewCache holds what is computed once per snapshot: every page, API call and TUI frame of one snapshot
// shares it instead of comparing every device of every node again. owner is the snapshot it was made for:
// a copy of the struct (tests copy snapshots to change a field) gets a cache of its own.
type viewCache struct {
	owner        *Snapshot
	overviewOnce sync.Once
	overview     *Overview
}

// cacheMu guards Snapshot.cache; a pointer rather than a sync.Once in the struct keeps snapshots copyable.
var cacheMu sync.Mutex

func (s *Snapshot) cached() *viewCache {
	cacheMu.Lock()
	defer cacheMu.Unlock()
	if s.cache == nil || s.cache.owner != s {
		s.cache = &viewCache{owner: s}
	}
	return s.cache
}

// FromObjects builds a snapshot from a static set of objects, as a support bundle or a test holds them.
// Objects of kinds the console does not read are ignored; VolumeSnapshotClasses are read from unstructured
// objects. The snapshot is marked installed; the caller may change the fields afterwards.
func FromObjects(objs []client.Object, at time.Time) *Snapshot {
	s := &Snapshot{At: at, Installed: true}
	for _, o := range objs {
		switch o := o.(type) {
		case *lvmv2.LVMNodeSet:
			s.LVMNodeSets = append(s.LVMNodeSets, *o)
		case *lvmv2.LVMNode:
			s.LVMNodes = append(s.LVMNodes, *o)
		case *lvmv1.LVMCluster:
			s.LVMClusters = append(s.LVMClusters, *o)
		case *lvmv1.LVMVolumeGroup:
			s.LVMVolumeGroups = append(s.LVMVolumeGroups, *o)
		case *lvmv1.LVMVolumeGroupNodeStatus:
			s.NodeStatuses = append(s.NodeStatuses, *o)
		case *topolvmv1.LogicalVolume:
			s.LogicalVolumes = append(s.LogicalVolumes, *o)
		case *topolvmv1.LogicalVolumeGroupSnapshot:
			s.GroupSnapshots = append(s.GroupSnapshots, *o)
		case *corev1.PersistentVolume:
			s.PVs = append(s.PVs, *o)
		case *corev1.PersistentVolumeClaim:
			s.PVCs = append(s.PVCs, *o)
		case *corev1.Pod:
			s.Pods = append(s.Pods, *o)
		case *storagev1.StorageClass:
			s.StorageClasses = append(s.StorageClasses, *o)
		case *storagev1.CSIStorageCapacity:
			s.StorageCapacities = append(s.StorageCapacities, *o)
		case *corev1.Node:
			s.Nodes = append(s.Nodes, *o)
		case *corev1.Event:
			s.Events = append(s.Events, *o)
		case *unstructured.Unstructured:
			if sc, ok := SnapshotClassFrom(o); ok {
				s.SnapshotClasses = append(s.SnapshotClasses, sc)
			}
		}
	}
	s.Sort()
	return s
}

// SnapshotClassFrom reads a VolumeSnapshotClass (snapshot.storage.k8s.io) from an unstructured object.
func SnapshotClassFrom(u *unstructured.Unstructured) (SnapshotClass, bool) {
	gvk := u.GroupVersionKind()
	if gvk.Group != "snapshot.storage.k8s.io" || gvk.Kind != "VolumeSnapshotClass" {
		return SnapshotClass{}, false
	}
	driver, _, _ := unstructured.NestedString(u.Object, "driver")
	policy, _, _ := unstructured.NestedString(u.Object, "deletionPolicy")
	return SnapshotClass{Name: u.GetName(), Driver: driver, DeletionPolicy: policy}, true
}

// Sort orders every list by namespace and name (events by time, newest first), so everything derived from
// the snapshot is deterministic.
func (s *Snapshot) Sort() {
	sortObjects(s.LVMNodeSets)
	sortObjects(s.LVMNodes)
	sortObjects(s.LVMClusters)
	sortObjects(s.LVMVolumeGroups)
	sortObjects(s.NodeStatuses)
	sortObjects(s.LogicalVolumes)
	sortObjects(s.GroupSnapshots)
	sortObjects(s.PVs)
	sortObjects(s.PVCs)
	sortObjects(s.Pods)
	sortObjects(s.StorageClasses)
	sortObjects(s.Nodes)
	slices.SortFunc(s.SnapshotClasses, func(a, b SnapshotClass) int { return strings.Compare(a.Name, b.Name) })
	slices.SortFunc(s.Hidden, func(a, b HiddenKind) int { return strings.Compare(a.Resource, b.Resource) })
	slices.SortFunc(s.Events, func(a, b corev1.Event) int {
		if c := eventTime(b).Compare(eventTime(a)); c != 0 {
			return c
		}
		return cmp.Or(strings.Compare(a.Namespace, b.Namespace), strings.Compare(a.Name, b.Name))
	})
}

// IsHidden reports whether the caller may not read resource (as in HiddenKind.Resource).
func (s *Snapshot) IsHidden(resource string) bool {
	_, hidden := s.hiddenReason(resource)
	return hidden
}

// hiddenReason is why resource is hidden, when it is.
func (s *Snapshot) hiddenReason(resource string) (string, bool) {
	if i := slices.IndexFunc(s.Hidden, func(h HiddenKind) bool { return h.Resource == resource }); i >= 0 {
		return s.Hidden[i].Reason, true
	}
	return "", false
}

// namespacedObject is the part of a Kubernetes object sortObjects needs.
type namespacedObject interface {
	GetNamespace() string
	GetName() string
}

func sortObjects[T any, P interface {
	*T
	namespacedObject
}](items []T) {
	slices.SortFunc(items, func(a, b T) int {
		pa, pb := P(&a), P(&b)
		return cmp.Or(strings.Compare(pa.GetNamespace(), pb.GetNamespace()), strings.Compare(pa.GetName(), pb.GetName()))
	})
}

// eventTime is the most recent time an event happened.
func eventTime(e corev1.Event) time.Time {
	switch {
	case !e.LastTimestamp.IsZero():
		return e.LastTimestamp.Time
	case e.Series != nil && !e.Series.LastObservedTime.IsZero():
		return e.Series.LastObservedTime.Time
	case !e.EventTime.IsZero():
		return e.EventTime.Time
	case !e.FirstTimestamp.IsZero():
		return e.FirstTimestamp.Time
	}
	return e.CreationTimestamp.Time
}

// Static is a Source that always returns the same snapshot (tests, support bundles).
type Static struct {
	Snap *Snapshot
	Err  error
}

// Snapshot returns the fixed snapshot or error.
func (s Static) Snapshot(context.Context) (*Snapshot, error) { return s.Snap, s.Err }

var _ Source = Static{}
