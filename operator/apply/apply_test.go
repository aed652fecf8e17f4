package apply

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/lvms-dev/lvms/api"
	lvmv2 "github.com/lvms-dev/lvms/api/lvm/v2alpha1"
)

func TestConfig(t *testing.T) {
	n := &lvmv2.LVMNode{
		ObjectMeta: metav1.ObjectMeta{Name: "n1", Namespace: "ns", ResourceVersion: "7", UID: "u", Generation: 3, Labels: map[string]string{"a": "b"}},
		Spec:       lvmv2.LVMNodeSpec{VolumeGroups: []lvmv2.VolumeGroup{{Name: "vg1"}}},
		Status:     lvmv2.LVMNodeStatus{State: lvmv2.StateReady},
	}
	u, err := Config(api.NewScheme(), n)
	if err != nil {
		t.Fatal(err)
	}
	if u.GetAPIVersion() != "lvm.topolvm.io/v2alpha1" || u.GetKind() != "LVMNode" {
		t.Errorf("apiVersion/kind = %s/%s", u.GetAPIVersion(), u.GetKind())
	}
	if _, ok := u.Object["status"]; ok {
		t.Error("status is applied, want it left out")
	}
	md := u.Object["metadata"].(map[string]any)
	for _, k := range []string{"resourceVersion", "uid", "generation", "creationTimestamp"} {
		if _, ok := md[k]; ok {
			t.Errorf("metadata.%s is applied, want it left out", k)
		}
	}
	spec := u.Object["spec"].(map[string]any)
	if _, ok := spec["deviceClasses"]; ok {
		t.Error("empty deviceClasses is applied, want it left out (it would take other managers' entries)")
	}
	if u.GetLabels()["a"] != "b" || u.GetName() != "n1" || u.GetNamespace() != "ns" {
		t.Errorf("metadata lost: %v", md)
	}
}
