package driver

import (
	"strings"

	groupsnapshotv1 "github.com/kubernetes-csi/external-snapshotter/client/v8/apis/volumegroupsnapshot/v1"
	snapshotv1 "github.com/kubernetes-csi/external-snapshotter/client/v8/apis/volumesnapshot/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"

	lvmv1alpha1 "github.com/lvms-dev/lvms/api/lvm/v1alpha1"
	lvmv2alpha1 "github.com/lvms-dev/lvms/api/lvm/v2alpha1"
	topolvmv1 "github.com/lvms-dev/lvms/api/topolvm/v1"
)

const (
	// DefaultDeviceClassKey is the annotation suffix and the name used for the default device class.
	DefaultDeviceClassKey = "00default"
	// CreatedByLabel marks LogicalVolumes with their creator, as TopoLVM does.
	CreatedByLabel = "app.kubernetes.io/created-by"
	// CreatedByValue is CreatedByLabel's value.
	CreatedByValue = "topolvm-controller"
	// SectorSize is the granularity of volume sizes.
	SectorSize = 4096
	// FSTypeParam is the StorageClass parameter with the file system type.
	FSTypeParam = "csi.storage.k8s.io/fstype"
	// SelectedNodeAnnotation is set on a PVC by the scheduler for WaitForFirstConsumer binding.
	SelectedNodeAnnotation = "volume.kubernetes.io/selected-node"
)

// SharedDriver is the CSI driver (and provisioner) of volumes on shared volume groups; it has no node topology
// and no legacy spelling.
const SharedDriver = "shared.lvm.topolvm.io"

// A volume of the shared driver is a LogicalVolume with an empty spec.nodeName (no node's lvmd reconciles
// it) and these annotations, set by the operator when it creates the object and never by a node agent.
const (
	// SharedVolumeGroupAnnotation names the shared volume group the LV lives in.
	SharedVolumeGroupAnnotation = SharedDriver + "/volume-group"
	// SharedWorkerAnnotation names the node whose agent creates, grows and removes the LV: one in the volume
	// group's lockspace (the operator holds no lock). The operator moves it when that node leaves.
	SharedWorkerAnnotation = SharedDriver + "/worker"
)

// KnownDrivers are every CSI driver name LVMS serves, in any mode: readers that recognise LVMS's volumes and
// classes (diagnostics) use it.
func KnownDrivers() []string {
	return []string{topolvmv1.GroupName, SharedDriver, topolvmv1.LegacyGroupName}
}

// Names are TopoLVM's names for one group: topolvm.io, or topolvm.cybozu.com in legacy mode.
type Names struct {
	prefix string
}

// New returns the names for the current group, or the legacy group when legacy is true.
func New(legacy bool) Names {
	if legacy {
		return Names{prefix: topolvmv1.LegacyGroupName}
	}
	return Names{prefix: topolvmv1.GroupName}
}

// Legacy reports whether these are the legacy names.
func (n Names) Legacy() bool { return n.prefix == topolvmv1.LegacyGroupName }

func (n Names) p() string {
	if n.prefix == "" {
		return topolvmv1.GroupName
	}
	return n.prefix
}

// Driver is the CSI driver (and StorageClass provisioner) name.
func (n Names) Driver() string { return n.p() }

// TopologyKey is the topology segment key holding the node name.
func (n Names) TopologyKey() string { return "topology." + n.p() + "/node" }

// CapacityAnnotation is the Node annotation with the free bytes of a device class ("" = default).
func (n Names) CapacityAnnotation(deviceClass string) string {
	if deviceClass == "" {
		deviceClass = DefaultDeviceClassKey
	}
	return "capacity." + n.p() + "/" + deviceClass
}

// CapacityAnnotationPrefix starts every capacity annotation.
func (n Names) CapacityAnnotationPrefix() string { return "capacity." + n.p() + "/" }

// DeviceClassParam is the StorageClass parameter naming the device class.
func (n Names) DeviceClassParam() string { return n.p() + "/device-class" }

// OptionClassParam is the StorageClass parameter naming the lvcreate option class.
func (n Names) OptionClassParam() string { return n.p() + "/lvcreate-option-class" }

// ResizeRequestedAt is the LogicalVolume annotation the controller sets when it grows a volume.
func (n Names) ResizeRequestedAt() string { return n.p() + "/resize-requested-at" }

// PendingDeletion marks a LogicalVolume the node must not reconcile any more.
func (n Names) PendingDeletion() string { return n.p() + "/pendingdeletion" }

// LogicalVolumeFinalizer is the node's finalizer on a LogicalVolume.
func (n Names) LogicalVolumeFinalizer() string { return n.p() + "/logicalvolume" }

// DeprecatedClaimFinalizer is what older TopoLVM releases put on claims; TopoLVM today and LVMS only remove it,
// so that a claim made back then can be deleted.
func (n Names) DeprecatedClaimFinalizer() string { return n.p() + "/pvc" }

// NodeFinalizer is the node agent's finalizer on its Node.
func (n Names) NodeFinalizer() string { return n.p() + "/node" }

// GroupVersion is the LogicalVolume group and version.
func (n Names) GroupVersion() schema.GroupVersion {
	return schema.GroupVersion{Group: n.p(), Version: "v1"}
}

// IsCapacityAnnotation reports whether key is a capacity annotation and returns its device class.
func (n Names) IsCapacityAnnotation(key string) (string, bool) {
	return strings.CutPrefix(key, n.CapacityAnnotationPrefix())
}

// AddToScheme adds every type LVMS uses to s, with LogicalVolume under this group only (so the one Go
// type maps to exactly one group), LogicalVolumeGroupSnapshot unless legacy, and the VolumeSnapshot types.
func (n Names) AddToScheme(s *runtime.Scheme) error {
	for _, add := range []func(*runtime.Scheme) error{
		clientgoscheme.AddToScheme, lvmv1alpha1.AddToScheme, lvmv2alpha1.AddToScheme, snapshotv1.AddToScheme, groupsnapshotv1.AddToScheme,
	} {
		if err := add(s); err != nil {
			return err
		}
	}
	gv := n.GroupVersion()
	s.AddKnownTypes(gv, &topolvmv1.LogicalVolume{}, &topolvmv1.LogicalVolumeList{})
	if !n.Legacy() {
		// Group snapshots exist under topolvm.io only (LogicalVolumeGroupSnapshot has no legacy CRD).
		s.AddKnownTypes(gv, &topolvmv1.LogicalVolumeGroupSnapshot{}, &topolvmv1.LogicalVolumeGroupSnapshotList{})
	}
	metav1.AddToGroupVersion(s, gv)
	return nil
}

// Scheme returns a new scheme from AddToScheme.
func (n Names) Scheme() (*runtime.Scheme, error) {
	s := runtime.NewScheme()
	if err := n.AddToScheme(s); err != nil {
		return nil, err
	}
	return s, nil
}
