package console

import (
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/api/resource"

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
	if c.Known || !strings.Contains(c.Text(), "carries no size") || !strings.Contains(c.Text(), "no capacity.topolvm.io/legacy annotation") {
		t.Errorf("v1 class without sizes: %s", c.Text())
	}
	s.Nodes[2].Annotations = map[string]string{"capacity.topolvm.io/legacy": "5368709120"}
	if c := capacity("node-3", "legacy"); c.Free.Human != "5 GiB" || !strings.Contains(c.Text(), "(capacity annotation capacity.topolvm.io/legacy)") {
		t.Errorf("v1 class with the annotation: %s", c.Text())
	}
}
