package consoletest

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	lvmv2 "github.com/lvms-dev/lvms/api/lvm/v2alpha1"
	topolvmv1 "github.com/lvms-dev/lvms/api/topolvm/v1"
)

// LargeNodeName is the name of node i of the Large state.
func LargeNodeName(i int) string { return fmt.Sprintf("node-%04d", i) }

// Large returns a synthetic state of nodes LVMNodes with devices candidate devices each: one set, one
// volume group per node named by an Any selector, three of every four devices in it and every fourth excluded
// with two reasons; every 50th node Degraded with a missing device; one thin device class with two volumes per
// node. It is the benchmark input (500 nodes x 16 devices).
func Large(nodes, devices int) []client.Object {
	const ns = "lvms"
	tmpl := lvmv2.LVMNodeSpec{
		VolumeGroups: []lvmv2.VolumeGroup{{Name: "vg1", DeviceSelector: lvmv2.DeviceSelector{DeviceSelectorTerms: []lvmv2.DeviceSelectorTerm{
			{MatchExpressions: []lvmv2.DeviceSelectorRequirement{{Key: lvmv2.KeyKName, Operator: lvmv2.OpAny}}}}}}},
		DeviceClasses: []lvmv2.DeviceClass{{Name: "fast", Strategy: lvmv2.StrategyThin, VolumeGroup: "vg1", Default: true,
			Thin: &lvmv2.ThinConfig{PoolName: ThinPool, SizePercent: 90, OverprovisionRatio: 10}}},
	}
	objs := []client.Object{
		&lvmv2.LVMNodeSet{ObjectMeta: metav1.ObjectMeta{Name: SetName, Namespace: ns},
			Spec:   lvmv2.LVMNodeSetSpec{Template: tmpl},
			Status: lvmv2.LVMNodeSetStatus{State: lvmv2.StateDegraded, DesiredNodes: int32(nodes)}},
		storageClass("lvms-fast", "fast"), snapshotClass("lvms-fast"),
	}
	for i := range nodes {
		name := LargeNodeName(i)
		objs = append(objs, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}})
		vg := lvmv2.VolumeGroupStatus{Name: "vg1", State: lvmv2.StateHealthy, Size: gi(int64(devices) * 100), Free: gi(10),
			Volumes: []lvmv2.LogicalVolumeStatus{{Name: ThinPool, Size: gi(int64(devices) * 90), DataPercent: "40.0", MetadataPercent: "12.5", Attributes: "twi-aotz--"}}}
		for d := range devices {
			kname := fmt.Sprintf("/dev/sd%c%c", 'a'+d/26, 'a'+d%26)
			if d%4 == 3 {
				vg.Devices.Excluded = append(vg.Devices.Excluded, excluded(kname,
					"Mounted", kname+" is mounted at /var/lib/x", "ForeignSignature", kname+" has an invalid filesystem signature (xfs)"))
				continue
			}
			vg.Devices.Included = append(vg.Devices.Included, lvmv2.Device{KName: kname, Size: gi(100)})
		}
		st := lvmv2.LVMNodeStatus{State: lvmv2.StateReady, ObservedGeneration: 1, VolumeGroups: []lvmv2.VolumeGroupStatus{vg},
			DeviceClasses: []lvmv2.DeviceClassStatus{{Name: "fast", VolumeGroup: "vg1", State: lvmv2.StateHealthy,
				StorageClass: &lvmv2.ClassStatus{Name: "lvms-fast", State: lvmv2.StateExists}}},
			Conditions: healthyConds(At)}
		if i%50 == 0 {
			st.State, st.Message = lvmv2.StateDegraded, "/dev/nvme9n1 was not found"
			st.VolumeGroups[0].State = lvmv2.StateDegraded
			st.VolumeGroups[0].Devices.Excluded = append(st.VolumeGroups[0].Devices.Excluded,
				excluded("/dev/nvme9n1", "NotFound", "/dev/nvme9n1 was not found"))
		}
		n := lvmNode(ns, name, st)
		n.Spec = tmpl
		objs = append(objs, n)
		for v := range 2 {
			lv := fmt.Sprintf("pvc-%04d-%d", i, v)
			objs = append(objs, &topolvmv1.LogicalVolume{ObjectMeta: metav1.ObjectMeta{Name: lv},
				Spec:   topolvmv1.LogicalVolumeSpec{Name: lv, NodeName: name, DeviceClass: "fast", Size: *gi(50)},
				Status: topolvmv1.LogicalVolumeStatus{VolumeID: lv + "-id"}})
		}
	}
	return objs
}
