package bundletest

import (
	"encoding/json"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	lvmv2 "github.com/lvms-dev/lvms/api/lvm/v2alpha1"
	topolvmv1 "github.com/lvms-dev/lvms/api/topolvm/v1"
	"github.com/lvms-dev/lvms/diagnostics/bundle"
	"github.com/lvms-dev/lvms/nodeagent/diagnostics"
)

// Names in the healthy state.
const (
	Namespace = "lvms"
	Set       = "fast"
	NodeA     = "worker-a"
	NodeB     = "worker-b"
	VG        = "vg1"
	Pool      = "thin-pool"
	Class     = "lvms-fast"
	Image     = "quay.io/lvms/lvms:v1.0.0"
	Version   = "v1.0.0"
)

// Nodes of the healthy state.
var Nodes = []string{NodeA, NodeB}

// Healthy is two Ready nodes of the LVMNodeSet "fast" (thin device class "fast" on vg1 with /dev/sdb;
// the boot partition /dev/sda1 excluded as reserved), their agents running, the CSI driver registered, one
// bound volume, and the agents' views consistent with it all.
func Healthy() *State {
	s := &State{Views: map[string]*diagnostics.View{}, Fetched: map[string]time.Time{}, RoundTrip: 20 * time.Millisecond,
		Manifest: bundle.Manifest{Format: bundle.FormatVersion, Product: bundle.Product, Version: Version, Started: At, Finished: At.Add(time.Second),
			Cluster: "hand-made", User: "kube:admin", Installed: true, Namespaces: []string{Namespace}}}
	tmpl := lvmv2.LVMNodeSpec{
		VolumeGroups: []lvmv2.VolumeGroup{{Name: VG, DeviceSelector: lvmv2.DeviceSelector{DeviceSelectorTerms: []lvmv2.DeviceSelectorTerm{
			{MatchExpressions: []lvmv2.DeviceSelectorRequirement{{Key: lvmv2.KeyType, Operator: lvmv2.OpIn, Values: []string{"disk", "part"}}}}}}}},
		DeviceClasses: []lvmv2.DeviceClass{{Name: "fast", Strategy: lvmv2.StrategyThin, VolumeGroup: VG, Default: true,
			Thin:          &lvmv2.ThinConfig{PoolName: Pool, SizePercent: 90, OverprovisionRatio: 10},
			StorageClass:  &lvmv2.StorageClassTemplate{NamingPolicy: lvmv2.NamingPrefixed, Prefix: "lvms"},
			SnapshotClass: &lvmv2.SnapshotClassTemplate{NamingPolicy: lvmv2.NamingPrefixed, Prefix: "lvms"}}},
	}
	created := metav1.NewTime(At.Add(-24 * time.Hour))
	set := &lvmv2.LVMNodeSet{ObjectMeta: metav1.ObjectMeta{Name: Set, Namespace: Namespace, Generation: 1, CreationTimestamp: created, UID: "uid-set-fast"},
		Spec: lvmv2.LVMNodeSetSpec{NodeSelector: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchExpressions: []corev1.NodeSelectorRequirement{
			{Key: "storage", Operator: corev1.NodeSelectorOpIn, Values: []string{"true"}}}}}},
			Provider: lvmv2.Provider{Strategy: lvmv2.ProviderManagedTopoLVM}, Template: tmpl},
		Status: lvmv2.LVMNodeSetStatus{State: lvmv2.StateReady, ObservedGeneration: 1, DesiredNodes: 2, ReadyNodes: 2,
			Nodes:      []lvmv2.NodeSummary{{Name: NodeA, State: lvmv2.StateReady}, {Name: NodeB, State: lvmv2.StateReady}},
			Provider:   lvmv2.ProviderStatus{State: lvmv2.StateReady},
			Conditions: []metav1.Condition{cond(lvmv2.ConditionLVMNodesReady), cond(lvmv2.ConditionProviderReady), cond(lvmv2.ConditionNoConflicts)}}}
	s.Objects = append(s.Objects, set,
		&storagev1.StorageClass{ObjectMeta: metav1.ObjectMeta{Name: Class}, Provisioner: "topolvm.io",
			Parameters: map[string]string{"topolvm.io/device-class": "fast"}, VolumeBindingMode: ptr.To(storagev1.VolumeBindingWaitForFirstConsumer)},
		snapshotClass(Class),
		&storagev1.CSIDriver{ObjectMeta: metav1.ObjectMeta{Name: "topolvm.io"}},
		operatorPod(),
	)
	for _, n := range Nodes {
		s.Objects = append(s.Objects,
			&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: n, Labels: map[string]string{"storage": "true", "kubernetes.io/hostname": n},
				Annotations: map[string]string{"capacity.topolvm.io/fast": "966367641600", "capacity.topolvm.io/00default": "966367641600"}},
				Status: corev1.NodeStatus{Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}}}},
			&storagev1.CSINode{ObjectMeta: metav1.ObjectMeta{Name: n}, Spec: storagev1.CSINodeSpec{Drivers: []storagev1.CSINodeDriver{{Name: "topolvm.io", NodeID: n}}}},
			lvmNode(n, tmpl, created),
			AgentPod(n),
		)
		s.Views[n] = View(n)
	}
	s.Objects = append(s.Objects, volume("pvc-0001", NodeA)...)
	return s
}

func cond(t string) metav1.Condition {
	return metav1.Condition{Type: t, Status: metav1.ConditionTrue, Reason: "AsExpected", ObservedGeneration: 1, LastTransitionTime: metav1.NewTime(At.Add(-time.Hour))}
}

func gi(n int64) *resource.Quantity { return resource.NewQuantity(n<<30, resource.BinarySI) }

func lvmNode(name string, tmpl lvmv2.LVMNodeSpec, created metav1.Time) *lvmv2.LVMNode {
	return &lvmv2.LVMNode{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: Namespace, Generation: 1, CreationTimestamp: created,
			Labels:          map[string]string{"nodeset.lvm.topolvm.io/" + Set: "true"},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "lvm.topolvm.io/v2alpha1", Kind: "LVMNodeSet", Name: Set, UID: "uid-set-fast", Controller: ptr.To(true)}}},
		Spec: tmpl,
		Status: lvmv2.LVMNodeStatus{State: lvmv2.StateReady, ObservedGeneration: 1,
			VolumeGroups: []lvmv2.VolumeGroupStatus{{Name: VG, State: lvmv2.StateHealthy, Size: gi(100), Free: gi(10),
				Devices: lvmv2.Devices{
					Included: []lvmv2.Device{{KName: "/dev/sdb", Path: "/dev/sdb", Size: gi(100)}},
					Excluded: []lvmv2.ExcludedDevice{{KName: "/dev/sda1", Reasons: []string{"/dev/sda1 is an EFI system partition"}, ReasonCodes: []string{"ReservedPartition"}}},
				},
				Volumes: []lvmv2.LogicalVolumeStatus{{Name: Pool, Size: gi(90), DataPercent: "40.00", MetadataPercent: "10.00", Attributes: "twi-aotz--"}}}},
			DeviceClasses: []lvmv2.DeviceClassStatus{{Name: "fast", VolumeGroup: VG, State: lvmv2.StateHealthy,
				StorageClass:  &lvmv2.ClassStatus{Name: Class, State: lvmv2.StateExists},
				SnapshotClass: &lvmv2.ClassStatus{Name: Class, State: lvmv2.StateExists}}},
			Conditions: []metav1.Condition{cond(lvmv2.ConditionVolumeGroupsHealthy), cond(lvmv2.ConditionDeviceClassesHealthy),
				cond(lvmv2.ConditionStorageClassesHealthy), cond(lvmv2.ConditionLVMDConfigured)}},
	}
}

func snapshotClass(name string) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]any{"driver": "topolvm.io", "deletionPolicy": "Delete"}}
	u.SetAPIVersion("snapshot.storage.k8s.io/v1")
	u.SetKind("VolumeSnapshotClass")
	u.SetName(name)
	return u
}

// AgentPod is the Running, Ready node agent pod of node.
func AgentPod(node string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "lvms-node-agent-" + node, Namespace: Namespace,
			Labels: map[string]string{"app.kubernetes.io/name": "lvms", "app.kubernetes.io/component": "node-agent"}},
		Spec: corev1.PodSpec{NodeName: node, Containers: []corev1.Container{{Name: "node-agent", Image: Image, Args: []string{"nodeagent", "--namespace=" + Namespace},
			Ports: []corev1.ContainerPort{{Name: diagnostics.PortName, ContainerPort: diagnostics.DefaultPort}}}}},
		Status: corev1.PodStatus{Phase: corev1.PodRunning, PodIP: "10.0.0.1",
			Conditions:        []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}},
			ContainerStatuses: []corev1.ContainerStatus{{Name: "node-agent", Ready: true, Image: Image, State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}}}},
	}
}

func operatorPod() *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "lvms-operator-7d9f", Namespace: Namespace, Labels: map[string]string{"app.kubernetes.io/name": "lvms", "app.kubernetes.io/component": "operator"}},
		Spec: corev1.PodSpec{NodeName: "control-plane", Containers: []corev1.Container{{Name: "operator", Image: Image, Args: []string{"operator"},
			Env: []corev1.EnvVar{{Name: "POD_NAMESPACE", Value: Namespace}}}}},
		Status: corev1.PodStatus{Phase: corev1.PodRunning, Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}},
	}
}

// volume is a bound LogicalVolume, PV, PVC and the pod using it.
func volume(name, node string) []client.Object {
	created := metav1.NewTime(At.Add(-time.Hour))
	return []client.Object{
		&topolvmv1.LogicalVolume{ObjectMeta: metav1.ObjectMeta{Name: name, CreationTimestamp: created},
			Spec:   topolvmv1.LogicalVolumeSpec{Name: name, NodeName: node, DeviceClass: "fast", Size: *gi(10)},
			Status: topolvmv1.LogicalVolumeStatus{VolumeID: name + "-id", CurrentSize: gi(10)}},
		&corev1.PersistentVolume{ObjectMeta: metav1.ObjectMeta{Name: name, CreationTimestamp: created},
			Spec: corev1.PersistentVolumeSpec{StorageClassName: Class, Capacity: corev1.ResourceList{corev1.ResourceStorage: *gi(10)},
				PersistentVolumeSource: corev1.PersistentVolumeSource{CSI: &corev1.CSIPersistentVolumeSource{Driver: "topolvm.io", VolumeHandle: name + "-id"}},
				ClaimRef:               &corev1.ObjectReference{Namespace: "apps", Name: "data"}},
			Status: corev1.PersistentVolumeStatus{Phase: corev1.VolumeBound}},
		&corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: "data", Namespace: "apps", CreationTimestamp: created},
			Spec: corev1.PersistentVolumeClaimSpec{StorageClassName: ptr.To(Class), VolumeName: name,
				Resources: corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: *gi(10)}}},
			Status: corev1.PersistentVolumeClaimStatus{Phase: corev1.ClaimBound}},
		&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "app-0", Namespace: "apps"},
			Spec: corev1.PodSpec{NodeName: node, Volumes: []corev1.Volume{{Name: "data", VolumeSource: corev1.VolumeSource{
				PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: "data"}}}}},
			Status: corev1.PodStatus{Phase: corev1.PodRunning}},
	}
}

// LVMD is the lvmd.yaml of the healthy state.
const LVMD = `socket-name: /run/topolvm/lvmd.sock
device-classes:
  - name: fast
    volume-group: vg1
    default: true
    spare-gb: 0
    type: thin
    thin-pool:
      name: thin-pool
      overprovision-ratio: 10
`

// View is the node agent's view of a healthy node: vg1 on /dev/sdb with the thin pool at 40% data and 10%
// metadata, /dev/sda1 excluded as an EFI partition.
func View(node string) *diagnostics.View {
	lsblk := `{"blockdevices":[{"name":"/dev/sda","kname":"/dev/sda","type":"disk","size":107374182400,"children":[{"name":"/dev/sda1","kname":"/dev/sda1","type":"part","size":536870912,"parttype":"c12a7328-f81f-11d2-ba4b-00a0c93ec93b","pkname":"/dev/sda"}]},` +
		`{"name":"/dev/sdb","kname":"/dev/sdb","type":"disk","size":107374182400,"fstype":"LVM2_member"}]}`
	return &diagnostics.View{APIVersion: diagnostics.ViewAPIVersion, Node: node, Version: Version, Time: At,
		Lsblk: json.RawMessage(lsblk), FullReport: json.RawMessage(FullReport(VG, Pool, "40.00", "10.00")),
		LVMD: &diagnostics.LVMDFile{Path: "/etc/topolvm/lvmd.yaml", Exists: true, Content: LVMD},
		Verdicts: []diagnostics.VolumeGroupVerdicts{{Name: VG, Exists: true, Devices: []diagnostics.DeviceVerdict{
			{KName: "/dev/sdb", Verdict: diagnostics.VerdictMember, Selected: true},
			{KName: "/dev/sda1", Verdict: diagnostics.VerdictExcluded, Selected: true, Reasons: []diagnostics.Reason{{Code: "ReservedPartition", Message: "/dev/sda1 is an EFI system partition"}}},
		}}}}
}

// FullReport is `lvm fullreport` JSON with volume group vg on /dev/sdb and thin pool pool at the given
// data and metadata percentages.
func FullReport(vg, pool, data, meta string) string {
	return fmt.Sprintf(`{"report":[{"vg":[{"vg_name":%q,"vg_uuid":"u1","vg_tags":"lvms","vg_attr":"wz--n-","vg_size":"107369988096","vg_free":"10737418240",`+
		`"vg_extent_size":"4194304","vg_extent_count":"25599","vg_free_count":"2560","pv_count":"1","lv_count":"1","vg_missing_pv_count":"0"}],`+
		`"pv":[{"pv_name":"/dev/sdb","pv_uuid":"p1","vg_name":%q,"pv_size":"107369988096","pv_free":"10737418240","pv_used":"96632569856",`+
		`"dev_size":"107374182400","pv_attr":"a--","pv_tags":"","pv_missing":"","pv_device_id":"","pv_device_id_type":""}],`+
		`"lv":[{"lv_name":%q,"lv_uuid":"l1","lv_full_name":"%s/%s","lv_path":"","vg_name":%q,"lv_size":"96632569856","lv_attr":"twi-aotz--",`+
		`"lv_tags":"","pool_lv":"","origin":"","data_percent":%q,"metadata_percent":%q,"lv_metadata_size":"1073741824","lv_layout":"thin,pool",`+
		`"lv_role":"private","lv_health_status":""}],"pvseg":[],"seg":[]}]}`, vg, vg, pool, vg, pool, vg, data, meta)
}
