package consoletest

import (
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	lvmv1 "github.com/lvms-dev/lvms/api/lvm/v1alpha1"
	lvmv2 "github.com/lvms-dev/lvms/api/lvm/v2alpha1"
)

// The sandbox state (issue 23), as `lvms local` leaves it on a kernel without device-mapper: nodes 1 and 2
// labelled lvms.local/api=v2, node 2 also lvms.local/fast=true, node 3 lvms.local/api=v1; LVMNodeSet
// "volumes" selects api=v2 (volume group vg-data of two disks named by link, no device classes), LVMNodeSet
// "thin" selects fast=true (thin class "fast" on vg-thin), LVMCluster "sandbox" selects api=v1 (class vg1 on
// a named and an optional disk). Each disk is a loop device with a /dev/disk/by-id/lvms-local-disk-* link.
const (
	SandboxNode1, SandboxNode2, SandboxNode3 = "lvms-local-1", "lvms-local-2", "lvms-local-3"
	SandboxDiskA, SandboxDiskB, SandboxDiskC = "/dev/disk/by-id/lvms-local-disk-a", "/dev/disk/by-id/lvms-local-disk-b", "/dev/disk/by-id/lvms-local-disk-c"
	// SandboxNoDM is why nothing can provision there.
	SandboxNoDM = "device-mapper is not available in this kernel"
	// SandboxVG1Reason is why device class vg1 on SandboxNode3 cannot provision volumes.
	SandboxVG1Reason = "device class vg1 cannot provision volumes: " + SandboxNoDM
)

// Sandbox returns the sandbox state in namespace ns at time at.
func Sandbox(ns string, at time.Time) []client.Object {
	sel := func(key, value string) *corev1.NodeSelector {
		return &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchExpressions: []corev1.NodeSelectorRequirement{
			{Key: key, Operator: corev1.NodeSelectorOpIn, Values: []string{value}}}}}}
	}
	named := func(vg string, links ...string) lvmv2.VolumeGroup {
		return lvmv2.VolumeGroup{Name: vg, DeviceSelector: lvmv2.DeviceSelector{DeviceSelectorTerms: []lvmv2.DeviceSelectorTerm{
			{MatchExpressions: []lvmv2.DeviceSelectorRequirement{{Key: lvmv2.KeyPath, Operator: lvmv2.OpIn, Values: links}}}}}}
	}
	gi := func(n int64) *resource.Quantity { return resource.NewQuantity(n<<20, resource.BinarySI) }
	volumes := lvmv2.LVMNodeSpec{VolumeGroups: []lvmv2.VolumeGroup{named("vg-data", SandboxDiskA, SandboxDiskB)}}
	thin := lvmv2.LVMNodeSpec{VolumeGroups: []lvmv2.VolumeGroup{named("vg-thin", SandboxDiskC)},
		DeviceClasses: []lvmv2.DeviceClass{{Name: "fast", Strategy: lvmv2.StrategyThin, VolumeGroup: "vg-thin",
			Thin: &lvmv2.ThinConfig{PoolName: "pool", SizePercent: 90, OverprovisionRatio: 10}}}}
	node := func(name string, labels map[string]string) *corev1.Node {
		return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}}
	}
	set := func(name string, s *corev1.NodeSelector, tmpl lvmv2.LVMNodeSpec) *lvmv2.LVMNodeSet {
		return &lvmv2.LVMNodeSet{TypeMeta: metav1.TypeMeta{APIVersion: "lvm.topolvm.io/v2alpha1", Kind: "LVMNodeSet"},
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}, Spec: lvmv2.LVMNodeSetSpec{NodeSelector: s, Template: tmpl}}
	}
	owned := metav1.ObjectMeta{Namespace: ns, OwnerReferences: []metav1.OwnerReference{
		{APIVersion: "lvm.topolvm.io/v2alpha1", Kind: "LVMNodeSet", Name: "volumes", Controller: ptr.To(true)}}}
	dev := func(kname, link string) lvmv2.Device {
		return lvmv2.Device{KName: kname, Path: link, Links: []string{link}, Size: gi(1024)}
	}
	foreign := func(kname, link, what string) lvmv2.ExcludedDevice {
		e := excluded(kname, "ForeignSignature", kname+" has "+what+" and cannot be used")
		e.Links, e.Size = []string{link}, gi(1024)
		return e
	}
	n1 := &lvmv2.LVMNode{ObjectMeta: owned, Spec: volumes, Status: lvmv2.LVMNodeStatus{State: lvmv2.StateReady, ObservedGeneration: 1,
		VolumeGroups: []lvmv2.VolumeGroupStatus{{Name: "vg-data", State: lvmv2.StateHealthy, Size: gi(1020), Free: gi(1020),
			Devices: lvmv2.Devices{Included: []lvmv2.Device{dev("/dev/loop0", SandboxDiskA)},
				Excluded: []lvmv2.ExcludedDevice{foreign("/dev/loop1", SandboxDiskB, "a ext4 filesystem signature")}}}},
		Conditions: []metav1.Condition{cond(at, lvmv2.ConditionVolumeGroupsHealthy, true, "AllHealthy", "every volume group is healthy")}}}
	n1.Name = SandboxNode1
	n2spec := volumes
	n2spec.VolumeGroups = append(append([]lvmv2.VolumeGroup(nil), volumes.VolumeGroups...), thin.VolumeGroups...)
	n2spec.DeviceClasses = thin.DeviceClasses
	n2 := &lvmv2.LVMNode{ObjectMeta: owned, Spec: n2spec, Status: lvmv2.LVMNodeStatus{State: lvmv2.StateDegraded, ObservedGeneration: 1,
		Message: "thin pool pool cannot be created: " + SandboxNoDM,
		VolumeGroups: []lvmv2.VolumeGroupStatus{
			{Name: "vg-data", State: lvmv2.StateHealthy, Size: gi(1020), Free: gi(1020),
				Devices: lvmv2.Devices{Included: []lvmv2.Device{dev("/dev/loop3", SandboxDiskB)},
					Excluded: []lvmv2.ExcludedDevice{foreign("/dev/loop2", SandboxDiskA, "a dos partition table")}}},
			{Name: "vg-thin", State: lvmv2.StateDegraded, Message: "thin pool pool cannot be created: " + SandboxNoDM, Size: gi(1020), Free: gi(1020),
				Devices: lvmv2.Devices{Included: []lvmv2.Device{dev("/dev/loop4", SandboxDiskC)}}}},
		DeviceClasses: []lvmv2.DeviceClassStatus{{Name: "fast", VolumeGroup: "vg-thin", State: lvmv2.StateFailed, Message: "device class fast cannot provision volumes: " + SandboxNoDM}},
		Conditions: []metav1.Condition{
			cond(at, lvmv2.ConditionDeviceClassesHealthy, false, "KernelTargetMissing", "device class fast cannot provision volumes: "+SandboxNoDM),
			cond(at, lvmv2.ConditionLVMDConfigured, false, "Partial", "lvmd.yaml lists no device class yet: fast waits for its thin pool in vg-thin")}}}
	n2.Name = SandboxNode2
	size, free := resource.MustParse("2040Mi"), resource.MustParse("2040Mi")
	n3 := &lvmv1.LVMVolumeGroupNodeStatus{ObjectMeta: metav1.ObjectMeta{Name: SandboxNode3, Namespace: ns,
		Annotations: map[string]string{lvmv1.NodeFactsAnnotation: lvmv1.NodeFacts{
			Devices:      map[string][]string{"/dev/loop5": {SandboxDiskA}, "/dev/loop6": {SandboxDiskB}},
			VolumeGroups: map[string]lvmv1.VolumeGroupFacts{"vg1": {Size: &size, Free: &free}}}.String()}},
		// Since issue 41 the agent writes a v1 volume group whose class cannot provision as not Ready (it
		// had written Ready beside the False condition, and the LVMCluster read Ready).
		Spec: lvmv1.LVMVolumeGroupNodeStatusSpec{LVMVGStatus: []lvmv1.VGStatus{{Name: "vg1", Status: lvmv1.VGStatusDegraded,
			Reason:  SandboxVG1Reason,
			Devices: []string{"/dev/loop5", "/dev/loop6"}, DeviceDiscoveryPolicy: lvmv1.DeviceDiscoveryPolicyPreconfigured}}},
		Status: lvmv1.LVMVolumeGroupNodeStatusStatus{ObservedGeneration: 1, Conditions: []metav1.Condition{
			cond(at, lvmv2.ConditionVolumeGroupsHealthy, true, "AllHealthy", "every volume group is healthy"),
			cond(at, lvmv2.ConditionDeviceClassesHealthy, false, "KernelTargetMissing", SandboxVG1Reason)}}}
	cluster := &lvmv1.LVMCluster{TypeMeta: metav1.TypeMeta{APIVersion: "lvm.topolvm.io/v1alpha1", Kind: "LVMCluster"},
		ObjectMeta: metav1.ObjectMeta{Name: "sandbox", Namespace: ns},
		Spec: lvmv1.LVMClusterSpec{Storage: lvmv1.Storage{DeviceClasses: []lvmv1.DeviceClass{{Name: "vg1", Default: true,
			NodeSelector:   sel("lvms.local/api", "v1"),
			DeviceSelector: &lvmv1.DeviceSelector{Paths: []lvmv1.DevicePath{SandboxDiskA}, OptionalPaths: []lvmv1.DevicePath{SandboxDiskB}}}}}}}
	return []client.Object{
		node(SandboxNode1, map[string]string{"lvms.local/api": "v2"}),
		node(SandboxNode2, map[string]string{"lvms.local/api": "v2", "lvms.local/fast": "true"}),
		node(SandboxNode3, map[string]string{"lvms.local/api": "v1"}),
		set("volumes", sel("lvms.local/api", "v2"), volumes),
		set("thin", sel("lvms.local/fast", "true"), thin),
		cluster, n1, n2, n3,
	}
}
