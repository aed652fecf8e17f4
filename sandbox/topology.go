package sandbox

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	lvmv1 "github.com/lvms-dev/lvms/api/lvm/v1alpha1"
	lvmv2 "github.com/lvms-dev/lvms/api/lvm/v2alpha1"
)

const (
	gib = int64(1) << 30
	mib = int64(1) << 20

	// Labels the sandbox puts on its Nodes; the samples select nodes with them.
	labelAPI  = "lvms.local/api"
	labelFast = "lvms.local/fast"
)

// NodeSpec is one simulated node of the sandbox.
type NodeSpec struct {
	Name   string
	Labels map[string]string
	Disks  []DiskSpec
}

// Topology is the sandbox's three nodes: two for the v2 API (one of them also carrying a thin device
// class) and one for the v1 API.
//
//	lvms-local-1  v2       disk-a 2Gi clean, disk-b 1Gi with an ext4 file system
//	lvms-local-2  v2, thin disk-a 3Gi with a partition table, disk-b 1Gi clean, disk-c 1Gi clean
//	lvms-local-3  v1       disk-a 1.5Gi clean, disk-b 512Mi clean
func Topology() []NodeSpec {
	return []NodeSpec{
		{Name: "lvms-local-1", Labels: map[string]string{labelAPI: "v2"}, Disks: []DiskSpec{
			{Name: "disk-a", Size: 2 * gib}, {Name: "disk-b", Size: gib, Prep: PrepExt4}}},
		{Name: "lvms-local-2", Labels: map[string]string{labelAPI: "v2", labelFast: "true"}, Disks: []DiskSpec{
			{Name: "disk-a", Size: 3 * gib, Prep: PrepPartitioned}, {Name: "disk-b", Size: gib}, {Name: "disk-c", Size: gib}}},
		{Name: "lvms-local-3", Labels: map[string]string{labelAPI: "v1"}, Disks: []DiskSpec{
			{Name: "disk-a", Size: 1536 * mib}, {Name: "disk-b", Size: 512 * mib}}},
	}
}

func selectorFor(key string, values ...string) *corev1.NodeSelector {
	return &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{
		MatchExpressions: []corev1.NodeSelectorRequirement{{Key: key, Operator: corev1.NodeSelectorOpIn, Values: values}},
	}}}
}

func pathsTerm(disks ...string) lvmv2.DeviceSelector {
	var paths []string
	for _, d := range disks {
		paths = append(paths, LinkName(d))
	}
	return lvmv2.DeviceSelector{DeviceSelectorTerms: []lvmv2.DeviceSelectorTerm{{
		MatchExpressions: []lvmv2.DeviceSelectorRequirement{{Key: lvmv2.KeyPath, Operator: lvmv2.OpIn, Values: paths}},
	}}}
}

// Samples are what the sandbox applies:
//
//   - LVMNodeSet "volumes" on the v2 nodes: volume group vg-data from disk-a and disk-b. Node 1 uses disk-a
//     and excludes disk-b (ext4 signature); node 2 excludes its partitioned disk-a and uses disk-b. Its
//     thick device class data (StorageClass lvms-data) needs no device-mapper to be Ready, and its volumes
//     can move between the two nodes.
//   - LVMNodeSet "thin" on node 2: vg-thin from disk-c with the thin device class "fast". Without
//     device-mapper its thin pool cannot be created: Degraded, with the reason.
//   - LVMCluster "sandbox" (v1) on node 3: device class vg1 on disk-a, optionally disk-b.
func Samples(namespace string) (sets []*lvmv2.LVMNodeSet, cluster *lvmv1.LVMCluster) {
	volumes := &lvmv2.LVMNodeSet{
		ObjectMeta: metav1.ObjectMeta{Name: "volumes", Namespace: namespace},
		Spec: lvmv2.LVMNodeSetSpec{
			NodeSelector: selectorFor(labelAPI, "v2"),
			Template: lvmv2.LVMNodeSpec{
				VolumeGroups:  []lvmv2.VolumeGroup{{Name: "vg-data", DeviceSelector: pathsTerm("disk-a", "disk-b")}},
				DeviceClasses: []lvmv2.DeviceClass{{Name: "data", Strategy: lvmv2.StrategyThick, VolumeGroup: "vg-data"}},
			},
		},
	}
	thin := &lvmv2.LVMNodeSet{
		ObjectMeta: metav1.ObjectMeta{Name: "thin", Namespace: namespace},
		Spec: lvmv2.LVMNodeSetSpec{
			NodeSelector: selectorFor(labelFast, "true"),
			Template: lvmv2.LVMNodeSpec{
				VolumeGroups: []lvmv2.VolumeGroup{{Name: "vg-thin", DeviceSelector: pathsTerm("disk-c")}},
				DeviceClasses: []lvmv2.DeviceClass{{
					Name: "fast", Strategy: lvmv2.StrategyThin, VolumeGroup: "vg-thin",
					Thin: &lvmv2.ThinConfig{PoolName: "pool", SizePercent: 90, OverprovisionRatio: 10},
				}},
			},
		},
	}
	cluster = &lvmv1.LVMCluster{ObjectMeta: metav1.ObjectMeta{Name: "sandbox", Namespace: namespace}}
	cluster.Spec.Storage.DeviceClasses = []lvmv1.DeviceClass{{
		Name:         "vg1",
		NodeSelector: selectorFor(labelAPI, "v1"),
		DeviceSelector: &lvmv1.DeviceSelector{
			Paths:         []lvmv1.DevicePath{lvmv1.DevicePath(LinkName("disk-a"))},
			OptionalPaths: []lvmv1.DevicePath{lvmv1.DevicePath(LinkName("disk-b"))},
		},
	}}
	return []*lvmv2.LVMNodeSet{volumes, thin}, cluster
}
