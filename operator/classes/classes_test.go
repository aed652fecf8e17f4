package classes

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	lvmv1 "github.com/lvms-dev/lvms/api/lvm/v1alpha1"
	lvmv2 "github.com/lvms-dev/lvms/api/lvm/v2alpha1"
	"github.com/lvms-dev/lvms/api/topolvm/driver"
	"github.com/lvms-dev/lvms/operator/names"
)

func TestForNodeSet(t *testing.T) {
	retain := corev1.PersistentVolumeReclaimRetain
	immediate := "Immediate"
	set := &lvmv2.LVMNodeSet{
		ObjectMeta: metav1.ObjectMeta{Name: "s", Namespace: "ns"},
		Spec: lvmv2.LVMNodeSetSpec{Template: lvmv2.LVMNodeSpec{
			VolumeGroups: []lvmv2.VolumeGroup{{Name: "vg1"}, {Name: "san", AccessPolicy: lvmv2.AccessPolicyShared}},
			DeviceClasses: []lvmv2.DeviceClass{
				{Name: "thin", Strategy: lvmv2.StrategyThin, VolumeGroup: "vg1", Default: true, Thin: &lvmv2.ThinConfig{PoolName: "p"}},
				{Name: "bulk", Strategy: lvmv2.StrategyThick, VolumeGroup: "vg1", FilesystemType: "ext4",
					StorageClass: &lvmv2.StorageClassTemplate{NamingPolicy: lvmv2.NamingExplicit, Name: "archive", ReclaimPolicy: &retain, VolumeBindingMode: &immediate}},
				{Name: "hidden", Strategy: lvmv2.StrategyThick, VolumeGroup: "vg1", StorageClass: &lvmv2.StorageClassTemplate{NamingPolicy: lvmv2.NamingNone}},
				{Name: "vm", Strategy: lvmv2.StrategyThick, VolumeGroup: "san", StorageClass: &lvmv2.StorageClassTemplate{Prefix: "shared"}},
			},
		}},
	}
	for _, tc := range []struct {
		legacy bool
		driver string
	}{{false, "topolvm.io"}, {true, "topolvm.cybozu.com"}} {
		got := ForNodeSet(set, driver.New(tc.legacy))
		want := []StorageClass{
			{Name: "lvms-thin", Provisioner: tc.driver, DeviceClass: "thin", FSType: "xfs", Default: true, ReclaimPolicy: corev1.PersistentVolumeReclaimDelete, VolumeBindingMode: storagev1.VolumeBindingWaitForFirstConsumer},
			{Name: "archive", Provisioner: tc.driver, DeviceClass: "bulk", FSType: "ext4", ReclaimPolicy: retain, VolumeBindingMode: storagev1.VolumeBindingImmediate},
			{Name: "shared-vm", Provisioner: names.SharedCSIDriverName, DeviceClass: "vm", ReclaimPolicy: corev1.PersistentVolumeReclaimDelete, VolumeBindingMode: storagev1.VolumeBindingWaitForFirstConsumer},
		}
		if len(got.StorageClasses) != len(want) {
			t.Fatalf("legacy=%v: StorageClasses = %+v, want %d", tc.legacy, got.StorageClasses, len(want))
		}
		for i := range want {
			g := got.StorageClasses[i]
			w := want[i]
			if g.Name != w.Name || g.Provisioner != w.Provisioner || g.DeviceClass != w.DeviceClass || g.FSType != w.FSType ||
				g.Default != w.Default || g.ReclaimPolicy != w.ReclaimPolicy || g.VolumeBindingMode != w.VolumeBindingMode {
				t.Errorf("legacy=%v: StorageClass %d = %+v, want %+v", tc.legacy, i, g, w)
			}
		}
		if len(got.SnapshotClasses) != 1 || got.SnapshotClasses[0] != (SnapshotClass{Name: "lvms-thin", DeviceClass: "thin", DeletionPolicy: "Delete"}) {
			t.Errorf("legacy=%v: SnapshotClasses = %+v, want one for the thin class", tc.legacy, got.SnapshotClasses)
		}
		if got.Driver.Driver() != tc.driver {
			t.Errorf("legacy=%v: the set is for driver %s, want %s", tc.legacy, got.Driver.Driver(), tc.driver)
		}
	}
	set.Spec.Provider.Strategy = lvmv2.ProviderUnmanaged
	if u := ForNodeSet(set, driver.Names{}); len(u.StorageClasses)+len(u.SnapshotClasses) != 0 {
		t.Errorf("Unmanaged provider generated classes: %+v", u)
	}
}

func TestForCluster(t *testing.T) {
	retain := corev1.PersistentVolumeReclaimRetain
	c := &lvmv1.LVMCluster{ObjectMeta: metav1.ObjectMeta{Name: "c", Namespace: "ns"}}
	c.Spec.Storage.DeviceClasses = []lvmv1.DeviceClass{
		{Name: "vg1", ThinPoolConfig: &lvmv1.ThinPoolConfig{Name: "p", OverprovisionRatio: 10}},
		{Name: "bulk", Default: true, FilesystemType: lvmv1.FilesystemExt4, StorageClassOptions: &lvmv1.StorageClassOptions{
			ReclaimPolicy: &retain, AdditionalParameters: map[string]string{"k": "v"}, AdditionalLabels: map[string]string{"team": "a"}}},
		{Name: "san", DeviceAccessPolicy: lvmv1.DeviceAccessPolicyShared},
	}
	got := ForCluster(c, driver.Names{})
	if n := got.StorageClassNames(); len(n) != 3 || n[0] != "lvms-bulk" || n[1] != "lvms-san" || n[2] != "lvms-vg1" {
		t.Fatalf("names = %v", n)
	}
	bulk := got.StorageClasses[1]
	if !bulk.Default || bulk.FSType != "ext4" || bulk.ReclaimPolicy != retain || bulk.Parameters["k"] != "v" || bulk.Labels["team"] != "a" {
		t.Errorf("bulk = %+v", bulk)
	}
	if got.StorageClasses[0].Default {
		t.Errorf("vg1 is default although bulk is marked default")
	}
	san := got.StorageClasses[2]
	if san.Provisioner != names.SharedCSIDriverName || san.FSType != "" {
		t.Errorf("shared class = %+v, want the shared driver and no fstype", san)
	}
	if len(got.SnapshotClasses) != 1 || got.SnapshotClasses[0].Name != "lvms-vg1" {
		t.Errorf("SnapshotClasses = %+v, want lvms-vg1 only", got.SnapshotClasses)
	}
	if legacy := ForCluster(c, driver.New(true)); legacy.StorageClasses[0].Provisioner != "topolvm.cybozu.com" ||
		legacy.StorageClasses[2].Provisioner != names.SharedCSIDriverName {
		t.Errorf("legacy classes = %+v, want topolvm.cybozu.com (shared: %s)", legacy.StorageClasses, names.SharedCSIDriverName)
	}
	single := &lvmv1.LVMCluster{Spec: lvmv1.LVMClusterSpec{Storage: lvmv1.Storage{DeviceClasses: []lvmv1.DeviceClass{{Name: "only"}}}}}
	if !ForCluster(single, driver.Names{}).StorageClasses[0].Default {
		t.Errorf("the only device class is not the default")
	}
	external := &lvmv1.LVMCluster{Spec: lvmv1.LVMClusterSpec{ConfigurationPolicy: lvmv1.ConfigurationPolicyExternal}}
	if e := ForCluster(external, driver.Names{}); len(e.StorageClasses) != 0 {
		t.Errorf("external configuration generated %+v", e.StorageClasses)
	}
}
