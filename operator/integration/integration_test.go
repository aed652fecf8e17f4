package integration

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	lvmv1 "github.com/lvms-dev/lvms/api/lvm/v1alpha1"
	lvmv2 "github.com/lvms-dev/lvms/api/lvm/v2alpha1"
	"github.com/lvms-dev/lvms/e2e/testenv"
	"github.com/lvms-dev/lvms/operator/optest"
	"github.com/lvms-dev/lvms/sandbox"
)

const gib = 1 << 30

func disk(name string, size int64) sandbox.DiskSpec { return sandbox.DiskSpec{Name: name, Size: size} }

func TestIntegration_NodeSetCreateBecomesReadyOnRealVolumeGroups(t *testing.T) {
	testenv.Require(t)
	cl := newCluster(t)
	a := cl.addNode("a", "storage", disk("d1", gib), sandbox.DiskSpec{Name: "d2", Size: gib / 2, Prep: sandbox.PrepExt4})
	b := cl.addNode("b", "storage", disk("d1", 2*gib))
	cl.create(cl.vgSet("data", "storage", "data", "d1", "d2"))

	s := cl.waitSet("data", lvmv2.StateReady, "")
	if s.Status.ReadyNodes != 2 {
		t.Errorf("ready nodes = %d, want 2", s.Status.ReadyNodes)
	}
	for _, n := range []*node{a, b} {
		if vgs := cl.volumeGroups(n); !slices.Equal(vgs, []string{cl.vg("data")}) {
			t.Errorf("volume groups on %s = %v, want [%s]", n.name, vgs, cl.vg("data"))
		}
	}
	// The ext4 disk of node a is excluded with its reason, and only there.
	ln := cl.lvmNode("a")
	vg := ln.Status.VolumeGroups[0]
	if len(vg.Devices.Included) != 1 || vg.Devices.Included[0].KName != a.disks["d1"] {
		t.Errorf("included on a = %+v, want %s", vg.Devices.Included, a.disks["d1"])
	}
	if len(vg.Devices.Excluded) != 1 || vg.Devices.Excluded[0].KName != a.disks["d2"] || !slices.Contains(vg.Devices.Excluded[0].ReasonCodes, string(lvmv2.ReasonForeignSignature)) {
		t.Errorf("excluded on a = %+v, want %s with ForeignSignature", vg.Devices.Excluded, a.disks["d2"])
	}
}

func TestIntegration_AddedNodeGetsItsLVMNodeAndBecomesReady(t *testing.T) {
	testenv.Require(t)
	cl := newCluster(t)
	cl.addNode("a", "storage", disk("d1", gib))
	cl.create(cl.vgSet("grow", "storage", "grow", "d1"))
	cl.waitSet("grow", lvmv2.StateReady, "")

	b := cl.addNode("b", "storage", disk("d1", gib))
	optest.Eventually(t, "node b's LVMNode Ready and the set Ready on 2 nodes", func() (bool, string) {
		n := cl.lvmNode("b")
		s := cl.set("grow")
		return n != nil && n.Status.State == lvmv2.StateReady && s.Status.ReadyNodes == 2 && s.Status.State == lvmv2.StateReady,
			optest.Describe(s.Status)
	})
	if vgs := cl.volumeGroups(b); !slices.Equal(vgs, []string{cl.vg("grow")}) {
		t.Errorf("volume groups on the new node = %v", vgs)
	}
}

func TestIntegration_MissingRequiredPathDegradesWithThePathNamed(t *testing.T) {
	testenv.Require(t)
	cl := newCluster(t)
	cl.addMetadataOnlyNode("good", "storage", disk("d1", gib), disk("d2", gib))
	cl.addMetadataOnlyNode("short", "storage", disk("d1", gib))
	c := &lvmv1.LVMCluster{ObjectMeta: metav1.ObjectMeta{Name: "lvms", Namespace: cl.ns}}
	c.Spec.Storage.DeviceClasses = []lvmv1.DeviceClass{{
		Name:           cl.vg("v1"),
		NodeSelector:   cl.selector("storage"),
		DeviceSelector: &lvmv1.DeviceSelector{Paths: []lvmv1.DevicePath{lvmv1.DevicePath(sandbox.LinkName("d1")), lvmv1.DevicePath(sandbox.LinkName("d2"))}},
	}}
	cl.create(c)
	var got *lvmv1.LVMCluster
	optest.Eventually(t, "the LVMCluster Degraded by the short node, the other node Ready", func() (bool, string) {
		got = cl.lvmCluster("lvms")
		ready := 0
		for _, dcs := range got.Status.DeviceClassStatuses {
			for _, ns := range dcs.NodeStatus {
				if ns.Status == lvmv1.VGStatusReady {
					ready++
				}
			}
		}
		return got.Status.State == lvmv1.LVMStatusDegraded && ready == 1 && strings.Contains(got.Status.Message, cl.nodeName("short")), optest.Describe(got.Status)
	})
	if !strings.Contains(got.Status.Message, sandbox.LinkName("d2")) {
		t.Errorf("message %q does not name the missing path %s", got.Status.Message, sandbox.LinkName("d2"))
	}
	for _, ns := range got.Status.DeviceClassStatuses[0].NodeStatus {
		want := lvmv1.VGStatusReady
		if ns.Node == cl.nodeName("short") {
			want = lvmv1.VGStatusFailed
		}
		if ns.Status != want && !(want == lvmv1.VGStatusFailed && ns.Status == lvmv1.VGStatusDegraded) {
			t.Errorf("node %s: %s (%s), want %s", ns.Node, ns.Status, ns.Reason, want)
		}
	}
}

func TestIntegration_OverlappingNodeSetsConflictAndNothingIsOverwritten(t *testing.T) {
	testenv.Require(t)
	cl := newCluster(t)
	a := cl.addNode("a", "storage", disk("d1", gib), disk("d2", gib))
	cl.create(cl.vgSet("first", "storage", "one", "d1"))
	cl.waitSet("first", lvmv2.StateReady, "")
	before := cl.lvmNode("a")

	// Same device, another volume group name.
	cl.create(cl.vgSet("second", "storage", "two", "d1", "d2"))
	cl.waitSet("second", lvmv2.StateConflict, "device "+sandbox.LinkName("d1"))
	cl.waitSet("first", lvmv2.StateConflict, "LVMNodeSet second also claims node "+cl.nodeName("a"))
	after := cl.lvmNode("a")
	if after.Generation != before.Generation || len(after.Spec.VolumeGroups) != 1 || after.Spec.VolumeGroups[0].Name != cl.vg("one") {
		t.Errorf("the LVMNode changed: generation %d -> %d, volume groups %v", before.Generation, after.Generation, after.Spec.VolumeGroups)
	}
	if c := optest.Condition(after.Status.Conditions, lvmv2.ConditionNoConflicts); c == nil || c.Status != metav1.ConditionFalse {
		t.Errorf("LVMNode NoConflicts = %+v, want False", c)
	}
	if vgs := cl.volumeGroups(a); !slices.Equal(vgs, []string{cl.vg("one")}) {
		t.Errorf("volume groups on the node = %v, want only the first set's", vgs)
	}
}

func TestIntegration_NodeClaimedByV1AndV2IsAConflict(t *testing.T) {
	testenv.Require(t)
	cl := newCluster(t)
	n := cl.addMetadataOnlyNode("a", "storage", disk("d1", gib), disk("d2", gib))
	c := &lvmv1.LVMCluster{ObjectMeta: metav1.ObjectMeta{Name: "lvms", Namespace: cl.ns}}
	c.Spec.Storage.DeviceClasses = []lvmv1.DeviceClass{{
		Name: cl.vg("v1"), NodeSelector: cl.selector("storage"),
		DeviceSelector: &lvmv1.DeviceSelector{Paths: []lvmv1.DevicePath{lvmv1.DevicePath(sandbox.LinkName("d1"))}},
	}}
	cl.create(c)
	cl.waitCluster("lvms", lvmv1.LVMStatusReady, "")
	cl.create(cl.thickSet("v2", "storage", "v2", "d2"))
	cl.waitSet("v2", lvmv2.StateConflict, "LVMCluster lvms already manages node "+cl.nodeName("a"))
	cl.waitCluster("lvms", lvmv1.LVMStatusDegraded, "LVMNodeSet v2 also claims node "+cl.nodeName("a"))
	if ln := cl.lvmNode("a"); ln != nil {
		t.Errorf("an LVMNode was created for a node the LVMCluster manages: %+v", ln.Spec)
	}
	if vgs := cl.volumeGroups(n); !slices.Equal(vgs, []string{cl.vg("v1")}) {
		t.Errorf("volume groups = %v, want only the LVMCluster's", vgs)
	}
}

func TestIntegration_DeletionWaitsForPVCsThenRemovesEverything(t *testing.T) {
	testenv.Require(t)
	cl := newCluster(t)
	n := cl.addNode("a", "storage", disk("d1", gib))
	cl.create(cl.thickSet("data", "storage", "data", "d1"))
	// The thick device class cannot provision here (no device-mapper): the set is Degraded, its volume
	// group exists and its StorageClass is generated.
	cl.waitSet("data", lvmv2.StateDegraded, "device-mapper")
	sc := "lvms-" + cl.ns + "-data"
	pvc := &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Name: "db-0", Namespace: cl.ns},
		Spec: corev1.PersistentVolumeClaimSpec{StorageClassName: &sc, AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			Resources: corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}}},
	}
	cl.create(pvc)
	if err := cl.c.Delete(context.Background(), cl.set("data")); err != nil {
		t.Fatal(err)
	}
	cl.waitSet("data", lvmv2.StateDeleting, "PersistentVolumeClaim "+cl.ns+"/db-0 ("+sc+")")
	if vgs := cl.volumeGroups(n); len(vgs) != 1 {
		t.Errorf("volume groups while deletion is blocked = %v, want the set's volume group kept", vgs)
	}

	// A Retained PV whose claim is gone still holds data on the volume group: it blocks too.
	retained := &corev1.PersistentVolume{
		ObjectMeta: metav1.ObjectMeta{Name: cl.ns + "-retained"},
		Spec: corev1.PersistentVolumeSpec{StorageClassName: sc, PersistentVolumeReclaimPolicy: corev1.PersistentVolumeReclaimRetain,
			AccessModes:            []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			Capacity:               corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")},
			PersistentVolumeSource: corev1.PersistentVolumeSource{CSI: &corev1.CSIPersistentVolumeSource{Driver: "topolvm.io", VolumeHandle: "old-volume"}},
			ClaimRef:               &corev1.ObjectReference{Namespace: cl.ns, Name: "deleted-long-ago"}},
	}
	cl.create(retained)
	t.Cleanup(func() { optest.DeleteVolume(t, cl.c, retained) })
	optest.DeleteVolume(t, cl.c, pvc)
	cl.waitSet("data", lvmv2.StateDeleting, "PersistentVolume "+retained.Name+" ("+sc+", Retain)")
	if vgs := cl.volumeGroups(n); len(vgs) != 1 {
		t.Errorf("volume groups while a Retained PV blocks deletion = %v, want the set's volume group kept", vgs)
	}
	optest.DeleteVolume(t, cl.c, retained)
	optest.Eventually(t, "the set, its LVMNode, StorageClass and volume group gone", func() (bool, string) {
		var s storagev1.StorageClass
		left := map[string]bool{
			"set":          cl.set("data") != nil,
			"lvmnode":      cl.lvmNode("a") != nil,
			"storageclass": optest.Get(t, cl.c, client.ObjectKey{Name: sc}, &s),
			"volumegroup":  len(cl.volumeGroups(n)) > 0,
		}
		for _, v := range left {
			if v {
				return false, fmt.Sprint(left)
			}
		}
		return true, ""
	})
}

func TestIntegration_DeletedNodeLeavesNoLVMNodeNodeStatusOrFinalizer(t *testing.T) {
	testenv.Require(t)
	cl := newCluster(t)
	cl.addNode("stays", "storage", disk("d1", gib))
	gone := cl.addNode("gone", "storage", disk("d1", gib))
	cl.create(cl.vgSet("data", "storage", "data", "d1"))
	c := &lvmv1.LVMCluster{ObjectMeta: metav1.ObjectMeta{Name: "lvms", Namespace: cl.ns}}
	c.Spec.Storage.DeviceClasses = []lvmv1.DeviceClass{{Name: cl.vg("v1"), NodeSelector: cl.selector("v1-only")}}
	cl.create(c)
	cl.waitSet("data", lvmv2.StateReady, "")

	// The machine goes away: its agent stops, then its Node object is deleted.
	gone.stop()
	var nodeObj corev1.Node
	optest.Get(t, cl.c, client.ObjectKey{Name: gone.name}, &nodeObj)
	if err := cl.c.Delete(context.Background(), &nodeObj); err != nil {
		t.Fatal(err)
	}
	optest.Eventually(t, "no LVMNode or node status left for the deleted node, and the set Ready on one node", func() (bool, string) {
		var st lvmv1.LVMVolumeGroupNodeStatus
		s := cl.set("data")
		return cl.lvmNode("gone") == nil && !optest.Get(t, cl.c, client.ObjectKey{Namespace: cl.ns, Name: gone.name}, &st) &&
			s.Status.DesiredNodes == 1 && s.Status.State == lvmv2.StateReady, optest.Describe(s.Status)
	})
}

func TestIntegration_DeviceClassesReportTheMissingDeviceMapper(t *testing.T) {
	testenv.Require(t)
	cl := newCluster(t)
	n := cl.addNode("a", "storage", disk("d1", gib))
	cl.create(cl.thickSet("thick", "storage", "thick", "d1"))
	got := cl.waitSet("thick", lvmv2.StateDegraded, "device-mapper is not available in this kernel")
	if !strings.Contains(got.Status.Message, "device class "+cl.ns+"-thick") {
		t.Errorf("message %q does not name the device class", got.Status.Message)
	}
	if vgs := cl.volumeGroups(n); !slices.Equal(vgs, []string{cl.vg("thick")}) {
		t.Errorf("volume groups = %v: the volume group itself should exist", vgs)
	}
}

func TestIntegration_ThinClassReportsTheMissingDeviceMapperTarget(t *testing.T) {
	testenv.Require(t)
	cl := newCluster(t)
	cl.addNode("a", "storage", disk("d1", gib))
	s := cl.thickSet("thin", "storage", "thin", "d1")
	s.Spec.Template.DeviceClasses[0].Strategy = lvmv2.StrategyThin
	s.Spec.Template.DeviceClasses[0].Thin = &lvmv2.ThinConfig{PoolName: "pool", SizePercent: 90, OverprovisionRatio: 10}
	cl.create(s)
	got := cl.waitSet("thin", lvmv2.StateDegraded, cl.nodeName("a"))
	if !strings.Contains(got.Status.Message, "thin pool pool cannot be created") || !strings.Contains(got.Status.Message, "device-mapper") {
		t.Errorf("message %q does not say the thin pool is the problem", got.Status.Message)
	}
	t.Logf("thin class on a kernel without device-mapper: %s", got.Status.Message)
}
