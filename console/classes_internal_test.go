package console

import (
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/lvms-dev/lvms/console/consoletest"
)

// In legacy mode (TopoLVM's old group, topolvm.cybozu.com) a StorageClass names its device class under
// that group's parameter: the class check, a Pending claim's device class and the published capacity all
// read it (issue 43 point 1: the console read topolvm.io's only, and called LVMS's own class foreign).
func TestLegacyStorageClass_IsReadAsItsDeviceClass(t *testing.T) {
	objs := consoletest.Sandbox("openshift-storage", consoletest.At)
	sc := &storagev1.StorageClass{ObjectMeta: metav1.ObjectMeta{Name: "lvms-vg1"}, Provisioner: "topolvm.cybozu.com",
		Parameters: map[string]string{"topolvm.cybozu.com/device-class": "vg1"}}
	claim := &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: "data", Namespace: "app"},
		Spec: corev1.PersistentVolumeClaimSpec{StorageClassName: ptr.To("lvms-vg1")}, Status: corev1.PersistentVolumeClaimStatus{Phase: corev1.ClaimPending}}
	snap := FromObjects(append(objs, sc, claim), consoletest.At)
	for _, d := range DeviceClasses(snap) {
		if d.Name == "vg1" && (d.StorageClass == nil || !d.StorageClass.InCluster || d.StorageClass.Differs) {
			t.Errorf("vg1's StorageClass check = %+v, want it found and matching", d.StorageClass)
		}
	}
	vols := Volumes(snap)
	if i := slices.IndexFunc(vols, func(v VolumeView) bool { return v.PVC == "app/data" }); i < 0 || vols[i].DeviceClass != "vg1" {
		t.Errorf("the Pending claim of the legacy class: %+v, want device class vg1", vols)
	}
	if !classServes(sc, "vg1") {
		t.Error("the legacy StorageClass does not serve vg1's capacity")
	}
}
