package consoletest

import (
	"time"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	lvmv1 "github.com/lvms-dev/lvms/api/lvm/v1alpha1"
	lvmv2 "github.com/lvms-dev/lvms/api/lvm/v2alpha1"
	topolvmv1 "github.com/lvms-dev/lvms/api/topolvm/v1"
)

// At is the time of the prepared state (the snapshot time in tests, so views are deterministic).
var At = time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)

// Names used by the prepared state, for assertions.
const (
	SetName         = "fast"
	ClusterName     = "legacy"
	NodeA           = "worker-a" // Ready; thin pool metadata at 92.3%
	NodeB           = "worker-b" // Degraded: /dev/nvme1n1 NotFound, excluded devices with several codes
	NodeC           = "worker-c" // Ready; also runs the v1alpha1 LVMCluster's device class
	MissingDevice   = "/dev/nvme1n1"
	UnknownCode     = "LockedEncryption"
	UnknownSentence = "/dev/sdd is a locked LUKS2 container and cannot be opened"
	MissingSC       = "bulk-storage"
	ThinPool        = "thin-pool"
)

// Prepared returns the small prepared state in namespace ns: three nodes of the LVMNodeSet "fast", with
//   - worker-b Degraded: /dev/nvme1n1 named by the spec is not found (NotFound), and its "scratch" volume
//     group excludes devices for HasChildren, ReservedPartition+ForeignSignature, Mounted+ForeignSignature,
//     ReadOnly, UsedByOtherVolumeGroup and an unknown code from a newer agent;
//   - worker-a's thin pool at 92.3% metadata;
//   - device class "bulk" whose StorageClass "bulk-storage" is missing;
//   - a v1alpha1 LVMCluster "legacy" on worker-c with an optional path in another volume group;
//   - a LogicalVolume bound through a PV and PVC to a pod, an orphaned one, and events.
func Prepared(ns string) []client.Object { return PreparedAt(ns, At) }

// PreparedAt is Prepared with every time in it (events, condition transitions, wipes) relative to at: tests
// against a real API server pass the clock their collector or console uses, so time windows select the
// same objects on any date.
func PreparedAt(ns string, at time.Time) []client.Object {
	labels := map[string]string{"lvms.test/storage": "true"}
	var objs []client.Object
	for _, n := range []string{NodeA, NodeB, NodeC} {
		l := map[string]string{"kubernetes.io/hostname": n}
		for k, v := range labels {
			l[k] = v
		}
		objs = append(objs, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: n, Labels: l}})
	}
	set := &lvmv2.LVMNodeSet{
		TypeMeta:   metav1.TypeMeta{APIVersion: "lvm.topolvm.io/v2alpha1", Kind: "LVMNodeSet"},
		ObjectMeta: metav1.ObjectMeta{Name: SetName, Namespace: ns, Generation: 1},
		Spec: lvmv2.LVMNodeSetSpec{
			NodeSelector: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchExpressions: []corev1.NodeSelectorRequirement{
				{Key: "lvms.test/storage", Operator: corev1.NodeSelectorOpIn, Values: []string{"true"}}}}}},
			Provider: lvmv2.Provider{Strategy: lvmv2.ProviderManagedTopoLVM},
			Template: template(),
		},
		Status: lvmv2.LVMNodeSetStatus{State: lvmv2.StateDegraded, Message: "1 of 3 nodes is not Ready: worker-b is Degraded",
			ObservedGeneration: 1, DesiredNodes: 3, ReadyNodes: 2,
			Nodes: []lvmv2.NodeSummary{{Name: NodeA, State: lvmv2.StateReady}, {Name: NodeB, State: lvmv2.StateDegraded,
				Message: "volume group vg1 is degraded: /dev/nvme1n1 was not found"}, {Name: NodeC, State: lvmv2.StateReady}},
			Provider:   lvmv2.ProviderStatus{State: lvmv2.StateReady},
			Conditions: []metav1.Condition{cond(at, lvmv2.ConditionLVMNodesReady, false, "NodesNotReady", "worker-b is Degraded"), cond(at, lvmv2.ConditionProviderReady, true, "Deployed", "")},
		},
	}
	objs = append(objs, set)
	objs = append(objs, lvmNode(ns, NodeA, statusA(at)), lvmNode(ns, NodeB, statusB(at)), lvmNode(ns, NodeC, statusC(at)))
	objs = append(objs, legacy(ns, at)...)
	objs = append(objs,
		storageClass("lvms-fast", "fast"), storageClass("lvms-legacy", "legacy"),
		snapshotClass("lvms-fast"), snapshotClass("lvms-legacy"))
	objs = append(objs, volumes(ns)...)
	objs = append(objs,
		event(ns, "b-path", "LVMNode", NodeB, corev1.EventTypeWarning, "DevicePathCheckFailed", "/dev/nvme1n1 was not found on worker-b", at.Add(-2*time.Minute)),
		event(ns, "a-ready", "LVMNode", NodeA, corev1.EventTypeNormal, "VolumeGroupReady", "volume group vg1 is ready", at.Add(-time.Hour)))
	return objs
}

func template() lvmv2.LVMNodeSpec {
	return lvmv2.LVMNodeSpec{
		VolumeGroups: []lvmv2.VolumeGroup{
			{Name: "vg1", ForceWipeDevicesAndDestroyAllData: ptr.To(true), DeviceSelector: lvmv2.DeviceSelector{DeviceSelectorTerms: []lvmv2.DeviceSelectorTerm{
				{MatchExpressions: []lvmv2.DeviceSelectorRequirement{{Key: lvmv2.KeyKName, Operator: lvmv2.OpIn, Values: []string{"/dev/nvme0n1", MissingDevice}}}}}}},
			{Name: "scratch", DeviceSelector: lvmv2.DeviceSelector{DeviceSelectorTerms: []lvmv2.DeviceSelectorTerm{
				{MatchExpressions: []lvmv2.DeviceSelectorRequirement{{Key: lvmv2.KeyType, Operator: lvmv2.OpIn, Values: []string{"disk", "part"}}}}}}},
		},
		DeviceClasses: []lvmv2.DeviceClass{
			{Name: "fast", Strategy: lvmv2.StrategyThin, VolumeGroup: "vg1", Default: true,
				Thin:          &lvmv2.ThinConfig{PoolName: ThinPool, SizePercent: 90, OverprovisionRatio: 10},
				StorageClass:  &lvmv2.StorageClassTemplate{NamingPolicy: lvmv2.NamingPrefixed, Prefix: "lvms"},
				SnapshotClass: &lvmv2.SnapshotClassTemplate{NamingPolicy: lvmv2.NamingPrefixed, Prefix: "lvms"}},
			{Name: "bulk", Strategy: lvmv2.StrategyThick, VolumeGroup: "scratch", FilesystemType: "ext4",
				StorageClass: &lvmv2.StorageClassTemplate{NamingPolicy: lvmv2.NamingExplicit, Name: MissingSC}},
		},
	}
}

func lvmNode(ns, name string, st lvmv2.LVMNodeStatus) *lvmv2.LVMNode {
	return &lvmv2.LVMNode{
		TypeMeta: metav1.TypeMeta{APIVersion: "lvm.topolvm.io/v2alpha1", Kind: "LVMNode"},
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Generation: 1, OwnerReferences: []metav1.OwnerReference{
			{APIVersion: "lvm.topolvm.io/v2alpha1", Kind: "LVMNodeSet", Name: SetName, Controller: ptr.To(true)}}},
		Spec:   template(),
		Status: st,
	}
}

func gi(n int64) *resource.Quantity { return resource.NewQuantity(n<<30, resource.BinarySI) }

func cond(at time.Time, t string, ok bool, reason, msg string) metav1.Condition {
	s := metav1.ConditionTrue
	if !ok {
		s = metav1.ConditionFalse
	}
	return metav1.Condition{Type: t, Status: s, Reason: reason, Message: msg, ObservedGeneration: 1,
		LastTransitionTime: metav1.NewTime(at.Add(-10 * time.Minute))}
}

func excluded(kname string, pairs ...string) lvmv2.ExcludedDevice {
	e := lvmv2.ExcludedDevice{KName: kname}
	for i := 0; i+1 < len(pairs); i += 2 {
		e.ReasonCodes = append(e.ReasonCodes, pairs[i])
		e.Reasons = append(e.Reasons, pairs[i+1])
	}
	return e
}

func classesStatus() []lvmv2.DeviceClassStatus {
	return []lvmv2.DeviceClassStatus{
		{Name: "fast", VolumeGroup: "vg1", State: lvmv2.StateHealthy,
			StorageClass:  &lvmv2.ClassStatus{Name: "lvms-fast", State: lvmv2.StateExists},
			SnapshotClass: &lvmv2.ClassStatus{Name: "lvms-fast", State: lvmv2.StateExists}},
		{Name: "bulk", VolumeGroup: "scratch", State: lvmv2.StateHealthy,
			StorageClass: &lvmv2.ClassStatus{Name: MissingSC, State: lvmv2.StateMissing}},
	}
}

func healthyConds(at time.Time, extra ...metav1.Condition) []metav1.Condition {
	cs := []metav1.Condition{
		cond(at, lvmv2.ConditionVolumeGroupsHealthy, true, "AllHealthy", "every volume group is healthy"),
		cond(at, lvmv2.ConditionDeviceClassesHealthy, true, "AllHealthy", "every device class is healthy"),
		cond(at, lvmv2.ConditionStorageClassesHealthy, false, "ClassMissing", "StorageClass bulk-storage does not exist"),
		cond(at, lvmv2.ConditionLVMDConfigured, true, "Written", "lvmd.yaml lists every device class"),
	}
	for _, e := range extra {
		for i := range cs {
			if cs[i].Type == e.Type {
				cs[i] = e
			}
		}
	}
	return cs
}

func statusA(at time.Time) lvmv2.LVMNodeStatus {
	wiped := metav1.NewTime(at.Add(-24 * time.Hour))
	return lvmv2.LVMNodeStatus{State: lvmv2.StateReady, ObservedGeneration: 1,
		VolumeGroups: []lvmv2.VolumeGroupStatus{
			{Name: "vg1", State: lvmv2.StateHealthy, Size: gi(200), Free: gi(20),
				Devices: lvmv2.Devices{Included: []lvmv2.Device{{KName: "/dev/nvme0n1", Size: gi(100)}, {KName: MissingDevice, Size: gi(100), Wiped: &wiped}}},
				Volumes: []lvmv2.LogicalVolumeStatus{{Name: ThinPool, Size: gi(180), DataPercent: "41.5", MetadataPercent: "92.3", Attributes: "twi-aotz--"}}},
			{Name: "scratch", State: lvmv2.StateHealthy, Size: gi(50), Free: gi(30),
				Devices: lvmv2.Devices{Included: []lvmv2.Device{{KName: "/dev/sdb", Size: gi(50)}},
					Excluded: []lvmv2.ExcludedDevice{
						excluded("/dev/sda1", "ReservedPartition", "/dev/sda1 has an invalid partition label \"BIOS-BOOT\""),
						excluded("/dev/nvme0n1", "UsedByOtherVolumeGroup", "/dev/nvme0n1 is already being used by vg1"),
					}}},
		},
		DeviceClasses: classesStatus(),
		Conditions:    healthyConds(at),
	}
}

func statusB(at time.Time) lvmv2.LVMNodeStatus {
	return lvmv2.LVMNodeStatus{State: lvmv2.StateDegraded, Message: "volume group vg1 is degraded: /dev/nvme1n1 was not found", ObservedGeneration: 1,
		VolumeGroups: []lvmv2.VolumeGroupStatus{
			{Name: "vg1", State: lvmv2.StateDegraded, Message: "/dev/nvme1n1 was not found", Size: gi(100), Free: gi(10),
				Devices: lvmv2.Devices{Included: []lvmv2.Device{{KName: "/dev/nvme0n1", Size: gi(100)}},
					Excluded: []lvmv2.ExcludedDevice{excluded(MissingDevice, "NotFound", "/dev/nvme1n1 was not found")}},
				Volumes: []lvmv2.LogicalVolumeStatus{{Name: ThinPool, Size: gi(90), DataPercent: "12.0", MetadataPercent: "4.1", Attributes: "twi-aotz--"}}},
			{Name: "scratch", State: lvmv2.StateHealthy, Size: gi(40), Free: gi(40),
				Devices: lvmv2.Devices{Included: []lvmv2.Device{{KName: "/dev/sde", Size: gi(40)}},
					Excluded: []lvmv2.ExcludedDevice{
						excluded("/dev/sda", "HasChildren", "/dev/sda has children block devices and could not be considered"),
						excluded("/dev/sda1", "ReservedPartition", "/dev/sda1 has an invalid partition label \"BIOS-BOOT\"",
							"ForeignSignature", "/dev/sda1 has an invalid filesystem signature (vfat) and cannot be used"),
						excluded("/dev/sdb", "Mounted", "/dev/sdb is mounted at /var/lib/data",
							"ForeignSignature", "/dev/sdb has an invalid filesystem signature (xfs) and cannot be used"),
						excluded("/dev/sdc", "ReadOnly", "/dev/sdc cannot be read-only"),
						excluded("/dev/sdd", UnknownCode, UnknownSentence),
						excluded("/dev/nvme0n1", "UsedByOtherVolumeGroup", "/dev/nvme0n1 is already being used by vg1"),
					}}},
		},
		DeviceClasses: classesStatus(),
		Conditions: healthyConds(at,
			cond(at, lvmv2.ConditionVolumeGroupsHealthy, false, "DeviceMissing", "vg1: /dev/nvme1n1 was not found"),
		),
	}
}

func statusC(at time.Time) lvmv2.LVMNodeStatus {
	return lvmv2.LVMNodeStatus{State: lvmv2.StateReady, ObservedGeneration: 1,
		VolumeGroups: []lvmv2.VolumeGroupStatus{
			{Name: "vg1", State: lvmv2.StateHealthy, Size: gi(200), Free: gi(20),
				Devices: lvmv2.Devices{Included: []lvmv2.Device{{KName: "/dev/nvme0n1", Size: gi(100)}, {KName: MissingDevice, Size: gi(100)}}},
				Volumes: []lvmv2.LogicalVolumeStatus{{Name: ThinPool, Size: gi(180), DataPercent: "3.0", MetadataPercent: "1.5", Attributes: "twi-aotz--"}}},
			{Name: "scratch", State: lvmv2.StateHealthy, Size: gi(50), Free: gi(50),
				Devices: lvmv2.Devices{Included: []lvmv2.Device{{KName: "/dev/sdb", Size: gi(50)}}}},
		},
		DeviceClasses: classesStatus(),
		Conditions:    healthyConds(at),
	}
}

// legacy is the v1alpha1 LVMCluster with one thin device class on worker-c, and worker-c's node status.
func legacy(ns string, at time.Time) []client.Object {
	c := &lvmv1.LVMCluster{
		TypeMeta:   metav1.TypeMeta{APIVersion: "lvm.topolvm.io/v1alpha1", Kind: "LVMCluster"},
		ObjectMeta: metav1.ObjectMeta{Name: ClusterName, Namespace: ns, Generation: 1},
		Spec: lvmv1.LVMClusterSpec{Storage: lvmv1.Storage{DeviceClasses: []lvmv1.DeviceClass{{
			Name:           "legacy",
			DeviceSelector: &lvmv1.DeviceSelector{Paths: []lvmv1.DevicePath{"/dev/vdb"}, OptionalPaths: []lvmv1.DevicePath{"/dev/vdc"}},
			NodeSelector: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchExpressions: []corev1.NodeSelectorRequirement{
				{Key: "kubernetes.io/hostname", Operator: corev1.NodeSelectorOpIn, Values: []string{NodeC}}}}}},
			ThinPoolConfig: &lvmv1.ThinPoolConfig{Name: "legacy-pool", SizePercent: 90, OverprovisionRatio: 10},
		}}}},
		Status: lvmv1.LVMClusterStatus{Ready: true, State: lvmv1.LVMStatusReady, ObservedGeneration: 1,
			DeviceClassStatuses: []lvmv1.DeviceClassStatus{{Name: "legacy", NodeStatus: []lvmv1.NodeStatus{{Node: NodeC,
				VGStatus: lvmv1.VGStatus{Name: "legacy", Status: lvmv1.VGStatusReady, Devices: []string{"/dev/vdb"}}}}}}},
	}
	s := &lvmv1.LVMVolumeGroupNodeStatus{
		TypeMeta:   metav1.TypeMeta{APIVersion: "lvm.topolvm.io/v1alpha1", Kind: "LVMVolumeGroupNodeStatus"},
		ObjectMeta: metav1.ObjectMeta{Name: NodeC, Namespace: ns},
		Spec: lvmv1.LVMVolumeGroupNodeStatusSpec{LVMVGStatus: []lvmv1.VGStatus{{Name: "legacy", Status: lvmv1.VGStatusReady,
			DeviceDiscoveryPolicy: lvmv1.DeviceDiscoveryPolicyPreconfigured, Devices: []string{"/dev/vdb"},
			Excluded: []lvmv1.ExcludedDevice{{Name: "/dev/vdc", ReasonCodes: []string{"OtherVolumeGroup"},
				Reasons: []string{"/dev/vdc is already a LVM2_Member of another volume group (data) and cannot be used for the volume group legacy"}}}}}},
		Status: lvmv1.LVMVolumeGroupNodeStatusStatus{ObservedGeneration: 1, Conditions: []metav1.Condition{
			cond(at, lvmv2.ConditionVolumeGroupsHealthy, true, "AllHealthy", "every volume group is healthy")}},
	}
	return []client.Object{c, s}
}

func storageClass(name, dc string) *storagev1.StorageClass {
	return &storagev1.StorageClass{ObjectMeta: metav1.ObjectMeta{Name: name}, Provisioner: "topolvm.io",
		Parameters:        map[string]string{"topolvm.io/device-class": dc, "csi.storage.k8s.io/fstype": "xfs"},
		VolumeBindingMode: ptr.To(storagev1.VolumeBindingWaitForFirstConsumer)}
}

func snapshotClass(name string) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]any{"driver": "topolvm.io", "deletionPolicy": "Delete"}}
	u.SetAPIVersion("snapshot.storage.k8s.io/v1")
	u.SetKind("VolumeSnapshotClass")
	u.SetName(name)
	return u
}

func volumes(ns string) []client.Object {
	lv := func(name, node, dc string, size int64, id string) *topolvmv1.LogicalVolume {
		return &topolvmv1.LogicalVolume{ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec:   topolvmv1.LogicalVolumeSpec{Name: name, NodeName: node, DeviceClass: dc, Size: *gi(size)},
			Status: topolvmv1.LogicalVolumeStatus{VolumeID: id, CurrentSize: gi(size)}}
	}
	pv := &corev1.PersistentVolume{ObjectMeta: metav1.ObjectMeta{Name: "pvc-0a1"},
		Spec: corev1.PersistentVolumeSpec{
			Capacity:                      corev1.ResourceList{corev1.ResourceStorage: *gi(10)},
			AccessModes:                   []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			PersistentVolumeReclaimPolicy: corev1.PersistentVolumeReclaimDelete,
			StorageClassName:              "lvms-fast",
			ClaimRef:                      &corev1.ObjectReference{Namespace: ns, Name: "data-db-0"},
			PersistentVolumeSource:        corev1.PersistentVolumeSource{CSI: &corev1.CSIPersistentVolumeSource{Driver: "topolvm.io", VolumeHandle: "0a1-uuid"}},
		},
		Status: corev1.PersistentVolumeStatus{Phase: corev1.VolumeBound}}
	pvc := &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: "data-db-0", Namespace: ns},
		Spec: corev1.PersistentVolumeClaimSpec{StorageClassName: ptr.To("lvms-fast"), VolumeName: "pvc-0a1",
			AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			Resources:   corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: *gi(10)}}},
		Status: corev1.PersistentVolumeClaimStatus{Phase: corev1.ClaimBound}}
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "db-0", Namespace: ns},
		Spec: corev1.PodSpec{NodeName: NodeA, Containers: []corev1.Container{{Name: "db", Image: "registry.example/db:1"}},
			Volumes: []corev1.Volume{{Name: "data", VolumeSource: corev1.VolumeSource{
				PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: "data-db-0"}}}}}}
	return []client.Object{lv("pvc-0a1", NodeA, "fast", 10, "0a1-uuid"), lv("pvc-0c3", NodeA, "bulk", 20, "0c3-uuid"), pv, pvc, pod}
}

func event(ns, name, kind, obj, typ, reason, msg string, at time.Time) *corev1.Event {
	return &corev1.Event{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		InvolvedObject: corev1.ObjectReference{APIVersion: "lvm.topolvm.io/v2alpha1", Kind: kind, Namespace: ns, Name: obj},
		Type:           typ, Reason: reason, Message: msg, Count: 1,
		FirstTimestamp: metav1.NewTime(at), LastTimestamp: metav1.NewTime(at),
		Source: corev1.EventSource{Component: "lvms-nodeagent"}}
}
