package provisioner_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	snapshotv1 "github.com/kubernetes-csi/external-snapshotter/client/v8/apis/volumesnapshot/v1"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	topolvmv1 "github.com/lvms-dev/lvms/api/topolvm/v1"
	"github.com/lvms-dev/lvms/e2e/csidriver"
)

func (s *suite) testThickLifecycle(t *testing.T) {
	s.t = t
	ctx := context.Background()
	sc := s.storageClass("thick", true)
	pvc := s.pvc("data", sc, "1Gi")

	// Without a selected node nothing happens (WaitForFirstConsumer).
	if err := s.c.Get(ctx, types.NamespacedName{Name: "pvc-" + string(pvc.UID)}, &corev1.PersistentVolume{}); !apierrors.IsNotFound(err) {
		t.Fatalf("PV before the scheduler chose a node: %v", err)
	}
	s.selectNode(pvc, s.nodeB)
	pv := s.provisioned(pvc)

	want := corev1.NodeSelectorRequirement{Key: s.names.TopologyKey(), Operator: corev1.NodeSelectorOpIn, Values: []string{s.nodeB}}
	if got := pv.Spec.NodeAffinity.Required.NodeSelectorTerms[0].MatchExpressions[0]; got.Key != want.Key || got.Values[0] != want.Values[0] {
		t.Errorf("node affinity %v, want %v", got, want)
	}
	if got := pv.Spec.Capacity[corev1.ResourceStorage]; got.Value() != csidriver.GiB {
		t.Errorf("capacity %s, want 1Gi", got.String())
	}
	if pv.Spec.PersistentVolumeReclaimPolicy != corev1.PersistentVolumeReclaimDelete || *pv.Spec.VolumeMode != corev1.PersistentVolumeFilesystem ||
		pv.Spec.CSI.Driver != s.names.Driver() || pv.Spec.CSI.FSType != "xfs" || pv.Spec.MountOptions[0] != "noatime" || pv.Spec.ClaimRef.UID != pvc.UID {
		t.Errorf("PV spec %+v", pv.Spec)
	}
	lv := s.logicalVolume(pv.Spec.CSI.VolumeHandle)
	if lv.Name != pv.Name || lv.Spec.NodeName != s.nodeB || lv.Spec.DeviceClass != "thick" || string(lv.UID) != pv.Spec.CSI.VolumeHandle {
		t.Errorf("LogicalVolume %s: %+v (uid %s)", lv.Name, lv.Spec, lv.UID)
	}
	if got, ok := s.d.Node(s.nodeB).LVM.LV("thick", pv.Spec.CSI.VolumeHandle); !ok || int64(got.Size) != csidriver.GiB {
		t.Fatalf("LV on %s: %+v (exists %v), want 1 GiB", s.nodeB, got, ok)
	}
	if _, ok := s.d.Node(s.nodeA).LVM.LV("thick", pv.Spec.CSI.VolumeHandle); ok {
		t.Fatalf("the LV was also created on %s", s.nodeA)
	}

	// Resize: the PVC asks for 2Gi; the LV and the PV grow, the node is asked to grow the file system, and
	// the pod using the claim is nudged so kubelet does it soon.
	s.bind(pvc, pv)
	pod := s.podUsing(pvc, s.nodeB)
	pvc.Spec.Resources.Requests[corev1.ResourceStorage] = resource.MustParse("2Gi")
	if err := s.c.Update(ctx, pvc); err != nil {
		t.Fatal(err)
	}
	s.eventually("PV grown to 2Gi", func() error {
		if err := s.c.Get(ctx, client.ObjectKeyFromObject(pv), pv); err != nil {
			return err
		}
		if got := pv.Spec.Capacity[corev1.ResourceStorage]; got.Value() != 2*csidriver.GiB {
			return fmt.Errorf("PV capacity %s", got.String())
		}
		return nil
	})
	if got, _ := s.d.Node(s.nodeB).LVM.LV("thick", pv.Spec.CSI.VolumeHandle); int64(got.Size) != 2*csidriver.GiB {
		t.Errorf("LV size after resize %d, want 2 GiB", got.Size)
	}
	s.eventually("FileSystemResizePending on the PVC", func() error {
		if err := s.c.Get(ctx, client.ObjectKeyFromObject(pvc), pvc); err != nil {
			return err
		}
		for _, c := range pvc.Status.Conditions {
			if c.Type == corev1.PersistentVolumeClaimFileSystemResizePending && c.Status == corev1.ConditionTrue {
				return nil
			}
		}
		return fmt.Errorf("conditions %v", pvc.Status.Conditions)
	})
	if err := s.c.Delete(ctx, pod, client.GracePeriodSeconds(0)); err != nil {
		t.Fatal(err)
	}

	// Delete: the released PV (reclaim Delete) goes, with its LogicalVolume and LV. The test plays the
	// pvc-protection controller, which lets the PVC go once no pod uses it.
	if err := s.c.Delete(ctx, pvc); err != nil {
		t.Fatal(err)
	}
	s.dropFinalizers(pvc)
	s.pvDeleted("PV deleted", pv)
	if _, ok := s.d.Node(s.nodeB).LVM.LV("thick", pv.Spec.CSI.VolumeHandle); ok {
		t.Error("LV still exists after the PV was deleted")
	}
}

func (s *suite) testThinSnapshotRestoreClone(t *testing.T) {
	s.t = t
	ctx := context.Background()
	sc := s.storageClass("thin", true)
	src := s.pvc("origin", sc, "1Gi")
	s.selectNode(src, s.nodeA)
	srcPV := s.provisioned(src)
	s.bind(src, srcPV)
	node := s.d.Node(s.nodeA).LVM

	content := s.snapshotOf(src, srcPV, "snap")
	snapLV, ok := node.LV("thin", *content.Status.SnapshotHandle)
	if !ok || snapLV.Origin != srcPV.Spec.CSI.VolumeHandle || !snapLV.ReadOnly {
		t.Fatalf("snapshot LV %+v (exists %v): want a read-only thin snapshot of %s", snapLV, ok, srcPV.Spec.CSI.VolumeHandle)
	}

	group := snapshotv1.GroupName
	restore := s.pvc("restore", sc, "1Gi", func(p *corev1.PersistentVolumeClaim) {
		p.Spec.DataSource = &corev1.TypedLocalObjectReference{APIGroup: &group, Kind: "VolumeSnapshot", Name: "snap"}
	})
	clone := s.pvc("clone", sc, "2Gi", func(p *corev1.PersistentVolumeClaim) {
		p.Spec.DataSource = &corev1.TypedLocalObjectReference{Kind: "PersistentVolumeClaim", Name: src.Name}
	})
	for _, tc := range []struct {
		pvc      *corev1.PersistentVolumeClaim
		origin   string
		wantSize int64
	}{
		{restore, *content.Status.SnapshotHandle, csidriver.GiB},
		{clone, srcPV.Spec.CSI.VolumeHandle, 2 * csidriver.GiB},
	} {
		// The source's node is the only choice; the scheduler picks it.
		s.selectNode(tc.pvc, s.nodeA)
		pv := s.provisioned(tc.pvc)
		lv, ok := node.LV("thin", pv.Spec.CSI.VolumeHandle)
		if !ok || lv.Origin != tc.origin || lv.ReadOnly || int64(lv.Size) != tc.wantSize {
			t.Errorf("%s: LV %+v (exists %v), want a writable thin volume of %d bytes from %s", tc.pvc.Name, lv, ok, tc.wantSize, tc.origin)
		}
		if got := pv.Spec.NodeAffinity.Required.NodeSelectorTerms[0].MatchExpressions[0].Values[0]; got != s.nodeA {
			t.Errorf("%s: PV on %s, want %s", tc.pvc.Name, got, s.nodeA)
		}
	}

	// Deleting the content deletes the snapshot LV.
	if err := s.c.Delete(ctx, content); err != nil {
		t.Fatal(err)
	}
	s.eventually("snapshot LV removed", func() error {
		if _, ok := node.LV("thin", *content.Status.SnapshotHandle); ok {
			return fmt.Errorf("snapshot LV %s still exists", *content.Status.SnapshotHandle)
		}
		return nil
	})
}

func (s *suite) testTooBig(t *testing.T) {
	s.t = t
	sc := s.storageClass("thick", true)
	pvc := s.pvc("huge", sc, "100Gi")
	s.selectNode(pvc, s.nodeA)
	msg := s.waitWarning(pvc, "Not enough space", "100Gi", "short")
	t.Logf("event: %s", msg)
	if !strings.Contains(msg, s.nodeA) || !strings.Contains(msg, `"thick"`) {
		t.Errorf("event %q should name the node %s and the device class", msg, s.nodeA)
	}
	if err := s.c.Get(context.Background(), types.NamespacedName{Name: "pvc-" + string(pvc.UID)}, &corev1.PersistentVolume{}); !apierrors.IsNotFound(err) {
		t.Errorf("a PV was created for a PVC that does not fit: %v", err)
	}
}

// testThinPoolPastThreshold: a claim on a node whose thin pool is past its data usage threshold is told
// why, with the pool, its use, the threshold and what to do, and gets no volume.
func (s *suite) testThinPoolPastThreshold(t *testing.T) {
	s.t = t
	sim := s.d.Node(s.nodeA).LVM
	sim.SetPoolUsage("thin", "pool", "93.00", "2.00")
	defer sim.ResetPoolUsage("thin", "pool")
	pvc := s.pvc("pool-past-threshold", s.storageClass("thin", true), "1Gi")
	s.selectNode(pvc, s.nodeA)
	msg := s.waitWarning(pvc, `thin pool thin/pool of device class "thin" is past its data usage threshold (93.0% used, threshold 90%)`,
		"extend the pool", "raise the device class's dataUsageThreshold")
	t.Logf("event: %s", msg)
	if strings.Contains(msg, "short") {
		t.Errorf("event %q speaks of a shortfall the node's published capacity does not show", msg)
	}
	if err := s.c.Get(context.Background(), types.NamespacedName{Name: "pvc-" + string(pvc.UID)}, &corev1.PersistentVolume{}); !apierrors.IsNotFound(err) {
		t.Errorf("a PV was created on a pool past its threshold: %v", err)
	}
}

func (s *suite) testBadInput(t *testing.T) {
	s.t = t
	tests := []struct {
		name    string
		sc      func() string
		mutate  func(*corev1.PersistentVolumeClaim)
		node    string
		want    []string
		noClass bool
	}{
		{name: "unknown device class", sc: func() string { return s.storageClass("nvme", true) }, node: s.nodeA, want: []string{"device-class not found: nvme"}},
		{name: "ReadWriteMany", sc: func() string { return s.storageClass("thick", true) }, node: s.nodeA,
			mutate: func(p *corev1.PersistentVolumeClaim) {
				p.Spec.AccessModes = []corev1.PersistentVolumeAccessMode{corev1.ReadWriteMany}
			}, want: []string{"ReadWriteMany is not supported"}},
		{name: "selected node gone", sc: func() string { return s.storageClass("thick", true) }, node: s.prefix + "-gone", want: []string{"does not exist"}},
		{name: "StorageClass missing", sc: func() string { return s.prefix + "-no-such-class" }, want: []string{"StorageClass", "does not exist"}},
	}
	for i, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s.t = t
			var mutate []func(*corev1.PersistentVolumeClaim)
			if tc.mutate != nil {
				mutate = append(mutate, tc.mutate)
			}
			pvc := s.pvc(fmt.Sprintf("bad-%d", i), tc.sc(), "1Gi", mutate...)
			if tc.node != "" {
				s.selectNode(pvc, tc.node)
			}
			t.Logf("event: %s", s.waitWarning(pvc, tc.want...))
		})
	}
}

func (s *suite) testCapacity(t *testing.T) {
	s.t = t
	ctx := context.Background()
	sc := s.storageClass("thin", false)
	s.eventually("CSIStorageCapacity for each node", func() error {
		list := &storagev1.CSIStorageCapacityList{}
		if err := s.c.List(ctx, list, client.InNamespace(s.ns)); err != nil {
			return err
		}
		found := 0
		for _, c := range list.Items {
			if c.StorageClassName != sc {
				continue
			}
			node := c.NodeTopology.MatchLabels[s.names.TopologyKey()]
			want, err := s.d.Capacity(ctx, node, "thin")
			if err != nil {
				return err
			}
			if c.Capacity.Value() != want {
				return fmt.Errorf("capacity of %s on %s: %s, want %d", sc, node, c.Capacity.String(), want)
			}
			found++
		}
		if found != 2 {
			return fmt.Errorf("%d objects for %s, want 2", found, sc)
		}
		return nil
	})
}

// testCapacityAdoption: the CSIStorageCapacity objects TopoLVM's external-provisioner left in the namespace
// are taken over in place (same name and UID, LVMS's label and figure, no owner left for the garbage
// collector), none is duplicated, and another driver's object is left alone.
func (s *suite) testCapacityAdoption(t *testing.T) {
	s.t = t
	ctx := context.Background()
	name := s.prefix + "-adopted"
	left := func(objName, driverName, node string) *storagev1.CSIStorageCapacity {
		blockOwner := true
		c := &storagev1.CSIStorageCapacity{
			ObjectMeta: metav1.ObjectMeta{Namespace: s.ns, Name: objName,
				Labels: map[string]string{"csi.storage.k8s.io/drivername": driverName, "csi.storage.k8s.io/managed-by": "external-provisioner"},
				OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "Deployment", Name: "topolvm-controller",
					UID: "0f1e2d3c-0000-4000-8000-000000000001", BlockOwnerDeletion: &blockOwner}}},
			StorageClassName: name,
			NodeTopology:     &metav1.LabelSelector{MatchLabels: map[string]string{s.names.TopologyKey(): node}},
			Capacity:         resource.NewQuantity(1, resource.BinarySI),
		}
		if err := s.c.Create(ctx, c); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = s.c.Delete(ctx, c) })
		return c
	}
	topolvm := left(s.prefix+"-csisc-abcde", s.names.Driver(), s.nodeA)
	other := left(s.prefix+"-csisc-other", "other.csi.example.com", s.nodeA)
	s.storageClass("thin", false, func(sc *storagev1.StorageClass) { sc.GenerateName, sc.Name = "", name })
	s.eventually("TopoLVM's object taken over and one object per node", func() error {
		list := &storagev1.CSIStorageCapacityList{}
		if err := s.c.List(ctx, list, client.InNamespace(s.ns)); err != nil {
			return err
		}
		perNode := map[string][]storagev1.CSIStorageCapacity{}
		for _, c := range list.Items {
			if c.StorageClassName == name && c.Labels["csi.storage.k8s.io/drivername"] != "other.csi.example.com" {
				node := c.NodeTopology.MatchLabels[s.names.TopologyKey()]
				perNode[node] = append(perNode[node], c)
			}
		}
		if len(perNode[s.nodeA]) != 1 || len(perNode[s.nodeB]) != 1 {
			return fmt.Errorf("objects per node: %v, want one for each of %s and %s", perNode, s.nodeA, s.nodeB)
		}
		got := perNode[s.nodeA][0]
		want, err := s.d.Capacity(ctx, s.nodeA, "thin")
		if err != nil {
			return err
		}
		if got.UID != topolvm.UID || len(got.OwnerReferences) != 0 || got.Labels["app.kubernetes.io/managed-by"] == "" ||
			got.Labels["csi.storage.k8s.io/managed-by"] != "" || got.Capacity.Value() != want {
			return fmt.Errorf("on %s: %s (UID %s, owners %v, labels %v, capacity %s); want TopoLVM's %s (UID %s) with LVMS's label, no owner, capacity %d",
				s.nodeA, got.Name, got.UID, got.OwnerReferences, got.Labels, got.Capacity, topolvm.Name, topolvm.UID, want)
		}
		return nil
	})
	cur := &storagev1.CSIStorageCapacity{}
	if err := s.c.Get(ctx, client.ObjectKeyFromObject(other), cur); err != nil || cur.Capacity.Value() != 1 || len(cur.OwnerReferences) != 1 {
		t.Errorf("another driver's object was touched: %+v, %v", cur, err)
	}
}

// testTopoLVMStorageClass provisions from a StorageClass in TopoLVM's own shape (testdata), unchanged but
// for the group in legacy mode.
func (s *suite) testTopoLVMStorageClass(t *testing.T) {
	s.t = t
	data, err := os.ReadFile(filepath.Join("testdata", "storageclass-topolvm.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if s.names.Legacy() {
		data = []byte(strings.ReplaceAll(string(data), "topolvm.io", "topolvm.cybozu.com"))
	}
	sc := &storagev1.StorageClass{}
	if err := yaml.UnmarshalStrict(data, sc); err != nil {
		t.Fatal(err)
	}
	sc.Name = s.prefix + "-" + sc.Name
	if err := s.c.Create(context.Background(), sc); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.c.Delete(context.Background(), sc) })
	pvc := s.pvc("from-topolvm-class", sc.Name, "1Gi")
	s.selectNode(pvc, s.nodeA)
	pv := s.provisioned(pvc)
	if lv, ok := s.d.Node(s.nodeA).LVM.LV("thin", pv.Spec.CSI.VolumeHandle); !ok || pv.Spec.CSI.FSType != "xfs" {
		t.Errorf("LV %+v (exists %v), fsType %q: want a thin volume with xfs", lv, ok, pv.Spec.CSI.FSType)
	}
}

// testDeprecatedClaimFinalizer: a claim an older TopoLVM put its finalizer on can be deleted.
func (s *suite) testDeprecatedClaimFinalizer(t *testing.T) {
	s.t = t
	ctx := context.Background()
	pvc := s.pvc("old-topolvm-claim", s.storageClass("thick", true), "1Gi", func(p *corev1.PersistentVolumeClaim) {
		p.Finalizers = []string{s.names.DeprecatedClaimFinalizer(), "example.com/keep"}
	})
	s.eventually("TopoLVM's deprecated finalizer removed, others kept", func() error {
		cur := &corev1.PersistentVolumeClaim{}
		if err := s.c.Get(ctx, client.ObjectKeyFromObject(pvc), cur); err != nil {
			return err
		}
		if slices.Contains(cur.Finalizers, s.names.DeprecatedClaimFinalizer()) || !slices.Contains(cur.Finalizers, "example.com/keep") {
			return fmt.Errorf("finalizers %v", cur.Finalizers)
		}
		return nil
	})
}

// testNodeGone: a node deleted while it carries TopoLVM's node finalizer has its LogicalVolumes released
// and can go; the claim whose volume lived there is told so.
func (s *suite) testNodeGone(t *testing.T) {
	s.t = t
	ctx := context.Background()
	name := s.prefix + "-node-x"
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Finalizers: []string{s.names.NodeFinalizer()}}}
	if err := s.c.Create(ctx, node); err != nil {
		t.Fatal(err)
	}
	lv := &topolvmv1.LogicalVolume{ObjectMeta: metav1.ObjectMeta{Name: s.prefix + "-pvc-on-x", Finalizers: []string{s.names.LogicalVolumeFinalizer()}},
		Spec: topolvmv1.LogicalVolumeSpec{Name: s.prefix + "-pvc-on-x", NodeName: name, Size: resource.MustParse("1Gi")}}
	if err := s.c.Create(ctx, lv); err != nil {
		t.Fatal(err)
	}
	sc := s.storageClass("thick", true)
	pvc := s.pvc("on-x", sc, "1Gi")
	mode := corev1.PersistentVolumeFilesystem
	pv := &corev1.PersistentVolume{ObjectMeta: metav1.ObjectMeta{Name: lv.Name},
		Spec: corev1.PersistentVolumeSpec{Capacity: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")},
			AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce}, PersistentVolumeReclaimPolicy: corev1.PersistentVolumeReclaimRetain,
			StorageClassName: sc, VolumeMode: &mode,
			ClaimRef:               &corev1.ObjectReference{Namespace: s.ns, Name: pvc.Name, UID: pvc.UID},
			PersistentVolumeSource: corev1.PersistentVolumeSource{CSI: &corev1.CSIPersistentVolumeSource{Driver: s.names.Driver(), VolumeHandle: "uid-on-x"}},
			NodeAffinity: &corev1.VolumeNodeAffinity{Required: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchExpressions: []corev1.NodeSelectorRequirement{
				{Key: s.names.TopologyKey(), Operator: corev1.NodeSelectorOpIn, Values: []string{name}}}}}}}}}
	if err := s.c.Create(ctx, pv); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.c.Delete(context.Background(), pv) })
	s.bind(pvc, pv)
	if err := s.c.Delete(ctx, node); err != nil {
		t.Fatal(err)
	}
	s.eventually("node and its LogicalVolume gone", func() error {
		if err := s.c.Get(ctx, client.ObjectKeyFromObject(node), node); !apierrors.IsNotFound(err) {
			return fmt.Errorf("node: %v (finalizers %v)", err, node.Finalizers)
		}
		if err := s.c.Get(ctx, client.ObjectKeyFromObject(lv), lv); !apierrors.IsNotFound(err) {
			return fmt.Errorf("LogicalVolume: %v", err)
		}
		return nil
	})
	t.Logf("event: %s", s.waitWarning(pvc, name, "no longer exists", "Delete this claim"))
}
