package console

import (
	"strings"
	"testing"

	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	lvmv1 "github.com/lvms-dev/lvms/api/lvm/v1alpha1"
	lvmv2 "github.com/lvms-dev/lvms/api/lvm/v2alpha1"
)

// Capacity comes from what is known and says from where; when the size is not known it says why.
func TestCapacity_FromWhatIsKnownOrWhyNot(t *testing.T) {
	s := sandboxOwners()
	size, free := resource.MustParse("10Gi"), resource.MustParse("4Gi")
	s.LVMNodes[0].Status.VolumeGroups = []lvmv2.VolumeGroupStatus{{Name: "vg-vg1", State: lvmv2.StateHealthy, Size: &size, Free: &free}}
	s.NodeStatuses[2].Spec.LVMVGStatus = []lvmv1.VGStatus{{Name: "legacy", Status: lvmv1.VGStatusReady, Devices: []string{"/dev/vdb"}}}
	capacity := func(node, class string) Capacity {
		t.Helper()
		v, err := Node(s, node)
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range v.Capacity {
			if c.DeviceClass == class {
				return c
			}
		}
		t.Fatalf("%s: no capacity for %s in %+v", node, class, v.Capacity)
		return Capacity{}
	}
	if c := capacity("node-1", "vg1"); !c.Known || c.Free.Human != "4 GiB" || c.From != "volume group vg-vg1" ||
		!strings.Contains(c.Text(), "6 GiB used of 10 GiB") {
		t.Errorf("thick class from its volume group: %+v (%s)", c, c.Text())
	}
	c := capacity("node-3", "legacy")
	if c.Known || !strings.Contains(c.Text(), "carries no size") || !strings.Contains(c.Text(), "neither a capacity.topolvm.io/legacy annotation") {
		t.Errorf("v1 class without sizes: %s", c.Text())
	}
	// The provisioner's CSIStorageCapacity for a StorageClass of the class, whose topology selects the node.
	s.StorageClasses = []storagev1.StorageClass{{ObjectMeta: metav1.ObjectMeta{Name: "lvms-legacy"}, Provisioner: "topolvm.io",
		Parameters: map[string]string{"topolvm.io/device-class": "legacy"}}}
	s.StorageCapacities = []storagev1.CSIStorageCapacity{{ObjectMeta: metav1.ObjectMeta{Name: "cap", Namespace: "lvms"}, StorageClassName: "lvms-legacy",
		NodeTopology: &metav1.LabelSelector{MatchLabels: map[string]string{"lvms.local/api": "v1"}}, Capacity: resource.NewQuantity(3<<30, resource.BinarySI)}}
	if c := capacity("node-3", "legacy"); c.Free.Human != "3 GiB" || !strings.Contains(c.Text(), "CSIStorageCapacity of StorageClass lvms-legacy") {
		t.Errorf("v1 class with a CSIStorageCapacity: %s", c.Text())
	}
	s.Nodes[2].Annotations = map[string]string{"capacity.topolvm.io/legacy": "5368709120"}
	if c := capacity("node-3", "legacy"); c.Free.Human != "5 GiB" || !strings.Contains(c.Text(), "(capacity annotation capacity.topolvm.io/legacy)") {
		t.Errorf("v1 class with the annotation: %s", c.Text())
	}
}

// On a v1 node the agent's node-facts annotation names each device's links and each volume group's size:
// the named disks resolve to their kernel devices and the capacity is known.
func TestNode_V1FactsResolveNamedDisksAndCapacity(t *testing.T) {
	s := sandboxOwners()
	const linkA = "/dev/disk/by-id/lvms-local-disk-a"
	s.LVMClusters[0].Spec.Storage.DeviceClasses[0].DeviceSelector = &lvmv1.DeviceSelector{Paths: []lvmv1.DevicePath{linkA}}
	s.NodeStatuses[2].Spec.LVMVGStatus = []lvmv1.VGStatus{{Name: "legacy", Status: lvmv1.VGStatusReady, Devices: []string{"/dev/loop5"}}}
	size, free := resource.MustParse("2Gi"), resource.MustParse("1Gi")
	s.NodeStatuses[2].Annotations = map[string]string{lvmv1.NodeFactsAnnotation: lvmv1.NodeFacts{
		Devices:      map[string][]string{"/dev/loop5": {linkA}},
		VolumeGroups: map[string]lvmv1.VolumeGroupFacts{"legacy": {Size: &size, Free: &free}}}.String()}
	v, err := Node(s, "node-3")
	if err != nil {
		t.Fatal(err)
	}
	var rows []DeviceRow
	for _, g := range v.VolumeGroups {
		rows = append(rows, g.Devices...)
	}
	if len(rows) != 1 || rows[0].KName != "/dev/loop5" || rows[0].Path != linkA || rows[0].State != DeviceInVG {
		t.Errorf("rows %+v, want /dev/loop5 under %s", rows, linkA)
	}
	if len(v.Capacity) != 1 || !v.Capacity[0].Known || v.Capacity[0].Free.Value != 1<<30 {
		t.Errorf("capacity %+v, want 1 GiB free from the facts", v.Capacity)
	}
	// A hand-edited, malformed annotation is ignored, not fatal.
	s.NodeStatuses[2].Annotations[lvmv1.NodeFactsAnnotation] = "{not json"
	if _, err := Node(s, "node-3"); err != nil {
		t.Errorf("malformed facts: %v", err)
	}
}
