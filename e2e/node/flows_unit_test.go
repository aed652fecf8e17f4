package node

import (
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	"sigs.k8s.io/yaml"
)

// TestDataStatefulSet checks the generated manifest: one mount and one claim per class, in order.
func TestDataStatefulSet(t *testing.T) {
	var ss appsv1.StatefulSet
	if err := yaml.UnmarshalStrict([]byte(dataStatefulSet("thick", "thin")), &ss); err != nil {
		t.Fatal(err)
	}
	c := ss.Spec.Template.Spec.Containers[0]
	if len(c.VolumeMounts) != 2 || c.VolumeMounts[1].Name != "thin" || c.VolumeMounts[1].MountPath != "/thin" {
		t.Errorf("mounts %+v", c.VolumeMounts)
	}
	if len(ss.Spec.VolumeClaimTemplates) != 2 || *ss.Spec.VolumeClaimTemplates[0].Spec.StorageClassName != "lvms-thick" {
		t.Errorf("claims %+v", ss.Spec.VolumeClaimTemplates)
	}
}
