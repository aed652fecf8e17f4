package nodeset_test

import (
	"context"
	"testing"

	storagev1 "k8s.io/api/storage/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	lvmv2 "github.com/lvms-dev/lvms/api/lvm/v2alpha1"
	"github.com/lvms-dev/lvms/operator/names"
	"github.com/lvms-dev/lvms/operator/optest"
)

// TestNodeSet_KeepStorageOnDelete: without the mark, deleting a set waits for its volumes, deletes its
// StorageClass and deletes the LVMNode with the volume groups still in its spec, which asks the node agent
// to remove them (today's teardown, unchanged). With the mark it does not wait, keeps the StorageClass, and
// takes its volume groups out of the LVMNode's spec before deleting it, so no removal is asked for.
func TestNodeSet_KeepStorageOnDelete(t *testing.T) {
	for _, keep := range []bool{false, true} {
		t.Run(map[bool]string{false: "without the mark", true: "with the mark"}[keep], func(t *testing.T) {
			ctx := context.Background()
			f := newFixture(t, optest.ReportReady)
			node := f.node("a", "storage")
			set := f.set("s", "storage", "vg1")
			if keep {
				set.Annotations = map[string]string{names.KeepStorageOnDeleteAnnotation: "true"}
			}
			f.create(set)
			f.waitSetState("s", lvmv2.StateReady, "")
			scName := "lvms-" + f.ns + "-vg1"
			var sc storagev1.StorageClass
			optest.Eventually(t, "the StorageClass", func() (bool, string) { return optest.Get(t, f.c, client.ObjectKey{Name: scName}, &sc), "" })
			// A finalizer ending in the node's name (the operator releases those of nodes that do not exist)
			// keeps the deleted LVMNode visible.
			hold := "test.lvms.io/" + node.Name
			var n lvmv2.LVMNode
			optest.Eventually(t, "the test's hold on the LVMNode", func() (bool, string) {
				optest.Get(t, f.c, client.ObjectKey{Namespace: f.ns, Name: node.Name}, &n)
				if !controllerutil.ContainsFinalizer(&n, optest.AgentFinalizer) {
					return false, "the fake agent's finalizer is not there yet"
				}
				if controllerutil.ContainsFinalizer(&n, hold) {
					return true, ""
				}
				base := n.DeepCopy()
				controllerutil.AddFinalizer(&n, hold)
				return false, optest.Describe(f.c.Patch(ctx, &n, client.MergeFromWithOptions(base, client.MergeFromWithOptimisticLock{})))
			})
			release := func() {
				var n lvmv2.LVMNode
				if optest.Get(t, f.c, client.ObjectKey{Namespace: f.ns, Name: node.Name}, &n) {
					base := n.DeepCopy()
					controllerutil.RemoveFinalizer(&n, hold)
					_ = f.c.Patch(ctx, &n, client.MergeFrom(base))
				}
			}
			t.Cleanup(release)
			pv := pvOn(f.ns+"-pv", scName, node.Name, f.ns, "data")
			f.create(pv)
			t.Cleanup(func() { optest.DeletePV(t, f.c, pv) })
			if err := f.c.Delete(ctx, f.getSet("s")); err != nil {
				t.Fatal(err)
			}
			if !keep {
				f.waitSetState("s", lvmv2.StateDeleting, "PersistentVolume "+pv.Name)
				optest.DeletePV(t, f.c, pv)
			}
			optest.Eventually(t, "the LVMNode deleted", func() (bool, string) {
				optest.Get(t, f.c, client.ObjectKey{Namespace: f.ns, Name: node.Name}, &n)
				return n.DeletionTimestamp != nil, optest.Describe(n.ObjectMeta)
			})
			if removal := len(n.Spec.VolumeGroups) > 0; removal != !keep {
				t.Errorf("the LVMNode was deleted with volume groups %v in its spec; want a removal request: %v", vgNames(&n), !keep)
			}
			classKept := optest.Get(t, f.c, client.ObjectKey{Name: scName}, &storagev1.StorageClass{})
			if !keep {
				optest.Eventually(t, "the StorageClass deleted", func() (bool, string) {
					return !optest.Get(t, f.c, client.ObjectKey{Name: scName}, &storagev1.StorageClass{}), ""
				})
			} else if !classKept {
				t.Error("the StorageClass was deleted although the set keeps its storage")
			}
			release()
			optest.Eventually(t, "the set gone", func() (bool, string) { return f.getSet("s") == nil, "" })
			if keep {
				var after storagev1.StorageClass
				if !optest.Get(t, f.c, client.ObjectKey{Name: scName}, &after) || after.UID != sc.UID {
					t.Errorf("StorageClass %s is gone or recreated after the set went", scName)
				}
				_ = f.c.Delete(ctx, &after) // nothing owns it any more
			}
		})
	}
}
