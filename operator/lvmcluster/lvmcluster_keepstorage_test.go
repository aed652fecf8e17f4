package lvmcluster_test

import (
	"context"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	lvmv1 "github.com/lvms-dev/lvms/api/lvm/v1alpha1"
	"github.com/lvms-dev/lvms/migrate/plan"
	"github.com/lvms-dev/lvms/operator/names"
	"github.com/lvms-dev/lvms/operator/optest"
)

// holdPrefix makes the finalizer that keeps a deleted LVMVolumeGroup visible, so the test can see how its
// deletion reached the node agents. It ends in the node's name: the operator releases per-node finalizers
// of nodes that do not exist.
const holdPrefix = "test.lvms.io/"

// removalRequested reports whether the LVMVolumeGroup was deleted while the LVMCluster still controls it:
// that is what makes a node agent remove the volume group (nodeagent/agent acts only on LVMVolumeGroups of
// its managed LVMCluster).
func removalRequested(vg *lvmv1.LVMVolumeGroup, c *lvmv1.LVMCluster) bool {
	ref := metav1.GetControllerOf(vg)
	return vg.DeletionTimestamp != nil && ref != nil && ref.UID == c.UID
}

// TestLVMCluster_KeepStorageOnDelete: without the mark, deleting an LVMCluster waits for its volumes, then
// deletes its StorageClass and asks the agents to remove the volume group (today's teardown, unchanged).
// With the mark it waits until an LVMNodeSet migrated from it took every node over, never asks for a
// volume group's removal, does not wait for volumes, and leaves the StorageClass to the set (same object).
func TestLVMCluster_KeepStorageOnDelete(t *testing.T) {
	for _, keep := range []bool{false, true} {
		name := map[bool]string{false: "without the mark", true: "with the mark"}[keep]
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			f := newFixture(t, optest.V1Ready)
			node := f.node("a", "storage")
			holdFinalizer := holdPrefix + node.Name
			cl := f.cluster("lvms", "storage", "vg1")
			if keep {
				cl.Annotations = map[string]string{names.KeepStorageOnDeleteAnnotation: "true"}
			}
			f.create(cl)
			cl = f.waitState("lvms", lvmv1.LVMStatusReady, "")
			dc := f.ns + "-vg1"
			var sc storagev1.StorageClass
			optest.Eventually(t, "the StorageClass", func() (bool, string) {
				return optest.Get(t, f.c, client.ObjectKey{Name: "lvms-" + dc}, &sc), ""
			})
			var vg lvmv1.LVMVolumeGroup
			optest.Eventually(t, "the agent's finalizer and the test's hold on the LVMVolumeGroup", func() (bool, string) {
				optest.Get(t, f.c, client.ObjectKey{Namespace: f.ns, Name: dc}, &vg)
				if len(vg.Finalizers) == 0 { // the fake agent has not put its own yet: it would overwrite ours
					return false, "no finalizer yet"
				}
				if controllerutil.ContainsFinalizer(&vg, holdFinalizer) {
					return true, ""
				}
				base := vg.DeepCopy()
				controllerutil.AddFinalizer(&vg, holdFinalizer)
				err := f.c.Patch(ctx, &vg, client.MergeFromWithOptions(base, client.MergeFromWithOptimisticLock{}))
				return false, optest.Describe(err)
			})
			t.Cleanup(func() {
				var vg lvmv1.LVMVolumeGroup
				if optest.Get(t, f.c, client.ObjectKey{Namespace: f.ns, Name: dc}, &vg) {
					base := vg.DeepCopy()
					controllerutil.RemoveFinalizer(&vg, holdFinalizer)
					_ = f.c.Patch(ctx, &vg, client.MergeFrom(base))
				}
			})
			pv := pvOn(f.ns+"-pv", "lvms-"+dc, node.Name)
			f.create(pv)
			t.Cleanup(func() { optest.DeletePV(t, f.c, pv) })
			if err := f.c.Delete(ctx, cl); err != nil {
				t.Fatal(err)
			}

			if !keep {
				f.waitState("lvms", lvmv1.LVMStatusProgressing, "PersistentVolume "+pv.Name)
				optest.DeletePV(t, f.c, pv)
				optest.Eventually(t, "the StorageClass deleted and the volume group's removal requested", func() (bool, string) {
					var vg lvmv1.LVMVolumeGroup
					optest.Get(t, f.c, client.ObjectKey{Namespace: f.ns, Name: dc}, &vg)
					return !optest.Get(t, f.c, client.ObjectKey{Name: sc.Name}, &storagev1.StorageClass{}) && removalRequested(&vg, cl), optest.Describe(vg.ObjectMeta)
				})
				return
			}

			c := f.waitState("lvms", lvmv1.LVMStatusProgressing, "still manages node(s) "+node.Name)
			if !strings.Contains(c.Status.Message, names.KeepStorageOnDeleteAnnotation) {
				t.Errorf("the message does not name the mark: %s", c.Status.Message)
			}
			optest.Get(t, f.c, client.ObjectKey{Namespace: f.ns, Name: dc}, &vg)
			if vg.DeletionTimestamp != nil {
				t.Fatalf("the LVMVolumeGroup was deleted while the LVMCluster still manages node %s", node.Name)
			}
			// Hand the node over to a set migrated from the LVMCluster, as lvms migrate does.
			p, err := plan.Build(plan.Input{Cluster: c})
			if err != nil {
				t.Fatal(err)
			}
			set := p.NodeSets[0].DeepCopy()
			set.Annotations[names.HandedOverNodesAnnotation] = node.Name
			f.create(set)
			optest.Eventually(t, "the LVMVolumeGroup released and deleted", func() (bool, string) {
				var vg lvmv1.LVMVolumeGroup
				optest.Get(t, f.c, client.ObjectKey{Namespace: f.ns, Name: dc}, &vg)
				if removalRequested(&vg, c) {
					t.Fatalf("the volume group's removal was requested: %+v", vg.ObjectMeta)
				}
				return vg.DeletionTimestamp != nil, optest.Describe(vg.ObjectMeta)
			})
			optest.Get(t, f.c, client.ObjectKey{Namespace: f.ns, Name: dc}, &vg)
			base := vg.DeepCopy()
			controllerutil.RemoveFinalizer(&vg, holdFinalizer)
			if err := f.c.Patch(ctx, &vg, client.MergeFrom(base)); err != nil {
				t.Fatal(err)
			}
			optest.Eventually(t, "the LVMCluster gone without waiting for the volume", func() (bool, string) {
				return f.get("lvms") == nil, ""
			})
			var after storagev1.StorageClass
			if !optest.Get(t, f.c, client.ObjectKey{Name: sc.Name}, &after) || after.UID != sc.UID {
				t.Fatalf("StorageClass %s was deleted or recreated (UID %s, was %s)", sc.Name, after.UID, sc.UID)
			}
			optest.Eventually(t, "the set adopting the StorageClass in place", func() (bool, string) {
				optest.Get(t, f.c, client.ObjectKey{Name: sc.Name}, &after)
				return after.UID == sc.UID && after.Labels[names.OwnerKindLabel] == names.KindNodeSet && after.Labels[names.OwnerNameLabel] == set.Name,
					optest.Describe(after.Labels)
			})
		})
	}
}

// pvOn is a PersistentVolume of StorageClass sc on node (a provisioned volume; no CSI driver runs here).
func pvOn(name, sc, node string) *corev1.PersistentVolume {
	return &corev1.PersistentVolume{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: corev1.PersistentVolumeSpec{
			StorageClassName:              sc,
			Capacity:                      corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")},
			AccessModes:                   []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			PersistentVolumeReclaimPolicy: corev1.PersistentVolumeReclaimRetain,
			PersistentVolumeSource:        corev1.PersistentVolumeSource{CSI: &corev1.CSIPersistentVolumeSource{Driver: "topolvm.io", VolumeHandle: name}},
			NodeAffinity: &corev1.VolumeNodeAffinity{Required: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{
				MatchExpressions: []corev1.NodeSelectorRequirement{{Key: "topology.topolvm.io/node", Operator: corev1.NodeSelectorOpIn, Values: []string{node}}},
			}}}},
		},
	}
}
