package provisioner_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	topolvmv1 "github.com/lvms-dev/lvms/api/topolvm/v1"
	"github.com/lvms-dev/lvms/operator/provisioner"
)

// testDeadNode: a node whose agent never answers holds more claims and released volumes than the
// provisioner has workers. Every CSI call for it ends at its deadline and is retried with backoff, so the
// other nodes keep provisioning and deleting, and the stuck claims are told which node does not answer.
func (s *suite) testDeadNode(t *testing.T) {
	s.t = t
	ctx := context.Background()
	dead := s.prefix + "-node-dead"
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: dead, Labels: map[string]string{s.names.TopologyKey(): dead},
		Annotations: map[string]string{s.names.CapacityAnnotation("thick"): fmt.Sprint(int64(1) << 40)}}}
	if err := s.c.Create(ctx, node); err != nil {
		t.Fatal(err)
	}
	var stuckLVs []*topolvmv1.LogicalVolume
	t.Cleanup(func() {
		_ = s.c.Delete(context.Background(), node)
		for _, lv := range stuckLVs {
			_ = s.c.Patch(context.Background(), lv, client.RawPatch(types.MergePatchType, []byte(`{"metadata":{"finalizers":null}}`)))
			_ = s.c.Delete(context.Background(), lv)
		}
	})
	sc := s.storageClass("thick", true)
	stuck := provisioner.DefaultWorkers + 2

	// Released volumes on the dead node: deleting each waits for an agent that never comes.
	for i := range stuck {
		name := fmt.Sprintf("%s-dead-lv-%d", s.prefix, i)
		lv := &topolvmv1.LogicalVolume{ObjectMeta: metav1.ObjectMeta{Name: name, Finalizers: []string{s.names.LogicalVolumeFinalizer()}},
			Spec: topolvmv1.LogicalVolumeSpec{Name: name, NodeName: dead, DeviceClass: "thick", Size: resource.MustParse("1Gi")}}
		if err := s.c.Create(ctx, lv); err != nil {
			t.Fatal(err)
		}
		patch := fmt.Sprintf(`{"status":{"volumeID":"dead-volume-%d"}}`, i)
		if err := s.c.Status().Patch(ctx, lv, client.RawPatch(types.MergePatchType, []byte(patch))); err != nil {
			t.Fatal(err)
		}
		stuckLVs = append(stuckLVs, lv)
		s.releasedPV(name, lv.Status.VolumeID, sc, dead)
	}
	// Claims for the dead node.
	var waiting []*corev1.PersistentVolumeClaim
	for i := range stuck {
		pvc := s.pvc(fmt.Sprintf("dead-%d", i), sc, "1Gi")
		t.Cleanup(func() { _ = s.c.Delete(context.Background(), pvc) })
		s.selectNode(pvc, dead)
		waiting = append(waiting, pvc)
	}

	// Meanwhile node A provisions, and a released volume of node A is deleted.
	for i := range 3 {
		pvc := s.pvc(fmt.Sprintf("alive-%d", i), sc, "1Gi")
		s.selectNode(pvc, s.nodeA)
		pv := s.provisioned(pvc)
		s.bind(pvc, pv)
		if i > 0 {
			continue
		}
		if err := s.c.Delete(ctx, pvc); err != nil {
			t.Fatal(err)
		}
		s.dropFinalizers(pvc)
		s.pvDeleted("node A's released PV deleted while the dead node's deletions hang", pv)

	}
	t.Logf("event: %s", s.waitWarning(waiting[0], "node agent", dead, "did not answer", "retried with backoff"))
}

// releasedPV creates a PV (reclaim Delete) on node whose claim is gone.
func (s *suite) releasedPV(name, handle, sc, node string) {
	s.t.Helper()
	s.pvOn(name, handle, sc, node, &corev1.ObjectReference{Namespace: s.ns, Name: "gone-" + name, UID: types.UID("gone-" + name)},
		corev1.PersistentVolumeReclaimDelete)
}

// pvOn creates a PV of the driver on node.
func (s *suite) pvOn(name, handle, sc, node string, claim *corev1.ObjectReference, reclaim corev1.PersistentVolumeReclaimPolicy, mutate ...func(*corev1.PersistentVolume)) *corev1.PersistentVolume {
	s.t.Helper()
	mode := corev1.PersistentVolumeFilesystem
	pv := &corev1.PersistentVolume{ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: corev1.PersistentVolumeSpec{Capacity: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")},
			AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce}, PersistentVolumeReclaimPolicy: reclaim,
			StorageClassName: sc, VolumeMode: &mode, ClaimRef: claim,
			PersistentVolumeSource: corev1.PersistentVolumeSource{CSI: &corev1.CSIPersistentVolumeSource{Driver: s.names.Driver(), VolumeHandle: handle}},
			NodeAffinity: &corev1.VolumeNodeAffinity{Required: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchExpressions: []corev1.NodeSelectorRequirement{
				{Key: s.names.TopologyKey(), Operator: corev1.NodeSelectorOpIn, Values: []string{node}}}}}}}}}
	for _, m := range mutate {
		m(pv)
	}
	if err := s.c.Create(context.Background(), pv); err != nil {
		s.t.Fatal(err)
	}
	s.t.Cleanup(func() {
		_ = s.c.Patch(context.Background(), pv, client.RawPatch(types.MergePatchType, []byte(`{"metadata":{"finalizers":null}}`)))
		_ = s.c.Delete(context.Background(), pv)
	})
	return pv
}

// testNodeLost: on a node lost past the grace period (NotReady, or its Node object deleted), a volume whose
// deletion was asked for (released, reclaim Delete) is released so its PV goes; a Retain volume and a
// volume still bound are kept. A node that is Ready again before the grace period ends keeps everything.
func (s *suite) testNodeLost(t *testing.T) {
	s.t = t
	ctx := context.Background()
	sc := s.storageClass("thick", true)
	for _, tc := range []struct {
		name     string
		node     func(name string) *corev1.Node // nil: the Node object is deleted
		comeBack bool
	}{
		{name: "NotReady", node: s.notReadyNode},
		{name: "deleted"},
		{name: "NotReady, then Ready again within the grace period", node: s.notReadyNode, comeBack: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s.t = t
			nodeName := fmt.Sprintf("%s-lost-%d", s.prefix, len(tc.name))
			var node *corev1.Node
			if tc.node != nil {
				node = tc.node(nodeName)
			}
			lv := func(suffix string, deleteRequested bool, reclaim corev1.PersistentVolumeReclaimPolicy, bound bool) *topolvmv1.LogicalVolume {
				name := nodeName + "-" + suffix
				lv := &topolvmv1.LogicalVolume{ObjectMeta: metav1.ObjectMeta{Name: name, Finalizers: []string{s.names.LogicalVolumeFinalizer()}},
					Spec: topolvmv1.LogicalVolumeSpec{Name: name, NodeName: nodeName, DeviceClass: "thick", Size: resource.MustParse("1Gi")}}
				if err := s.c.Create(ctx, lv); err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() {
					_ = s.c.Patch(context.Background(), lv, client.RawPatch(types.MergePatchType, []byte(`{"metadata":{"finalizers":null}}`)))
					_ = s.c.Delete(context.Background(), lv)
				})
				patch := fmt.Sprintf(`{"status":{"volumeID":%q}}`, name)
				if err := s.c.Status().Patch(ctx, lv, client.RawPatch(types.MergePatchType, []byte(patch))); err != nil {
					t.Fatal(err)
				}
				claim := &corev1.ObjectReference{Namespace: s.ns, Name: "gone-" + name, UID: types.UID("gone-" + name)}
				var pvc *corev1.PersistentVolumeClaim
				if bound {
					pvc = s.pvc(name, sc, "1Gi")
					claim = &corev1.ObjectReference{Namespace: pvc.Namespace, Name: pvc.Name, UID: pvc.UID}
				}
				pv := s.pvOn(name, name, sc, nodeName, claim, reclaim)
				if bound {
					s.bind(pvc, pv)
				}
				if deleteRequested {
					// The deleter asks for it (DeleteVolume); wait until it has.
					s.eventually("deletion of "+name+" asked for", func() error {
						if err := s.c.Get(ctx, client.ObjectKeyFromObject(lv), lv); err != nil {
							return err
						}
						if lv.DeletionTimestamp.IsZero() {
							return fmt.Errorf("LogicalVolume %s not being deleted", lv.Name)
						}
						return nil
					})
				}
				return lv
			}
			deleted := lv("delete", true, corev1.PersistentVolumeReclaimDelete, false)
			retained := lv("retain", false, corev1.PersistentVolumeReclaimRetain, false)
			inUse := lv("bound", false, corev1.PersistentVolumeReclaimDelete, true)

			s.poke(deleted) // the operator sees the node lost now
			s.eventually("lost node recorded", func() error {
				if err := s.c.Get(ctx, client.ObjectKeyFromObject(deleted), deleted); err != nil {
					return err
				}
				if deleted.Annotations["lvm.topolvm.io/node-lost-since"] == "" {
					return fmt.Errorf("annotations %v", deleted.Annotations)
				}
				return nil
			})
			t.Logf("event: %s", s.waitEvent(deleted.UID, "is lost", "unless the node comes back"))
			s.stillThere(deleted, "within the grace period")
			if tc.comeBack {
				node.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue,
					LastTransitionTime: metav1.NewTime(s.clock.Now()), LastHeartbeatTime: metav1.NewTime(s.clock.Now())}}
				if err := s.c.Status().Update(ctx, node); err != nil {
					t.Fatal(err)
				}
				s.eventually("the lost record cleared once the node is back", func() error {
					if err := s.c.Get(ctx, client.ObjectKeyFromObject(deleted), deleted); err != nil {
						return err
					}
					if v, ok := deleted.Annotations["lvm.topolvm.io/node-lost-since"]; ok {
						return fmt.Errorf("still recorded lost since %s", v)
					}
					return nil
				})
			}
			s.clock.Step(provisioner.DefaultNodeLostGracePeriod + time.Minute)
			s.poke(deleted)
			if tc.comeBack {
				s.stillThere(deleted, "after its node came back")
				return
			}
			s.eventually("the asked-for deletion completed without the agent", func() error {
				if err := s.c.Get(ctx, client.ObjectKeyFromObject(deleted), &topolvmv1.LogicalVolume{}); !apierrors.IsNotFound(err) {
					return fmt.Errorf("LogicalVolume %s: %v", deleted.Name, err)
				}
				return nil
			})
			s.pvDeleted("its PV went", &corev1.PersistentVolume{ObjectMeta: metav1.ObjectMeta{Name: deleted.Name}})
			t.Logf("event: %s", s.waitEvent(deleted.UID, "released this volume without its node agent"))
			pvs := &corev1.PersistentVolumeList{}
			if err := s.c.List(ctx, pvs); err != nil {
				t.Fatal(err)
			}
			for _, pv := range pvs.Items {
				if pv.Name == retained.Name {
					t.Logf("event on the kept PV: %s", s.waitEvent(pv.UID, "is kept (reclaim policy Retain)", "Delete the PersistentVolume"))
				}
			}
			s.stillThere(retained, "reclaim policy Retain")
			s.stillThere(inUse, "bound to a claim")
		})
	}
}

func (s *suite) notReadyNode(name string) *corev1.Node {
	s.t.Helper()
	ctx := context.Background()
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}}
	if err := s.c.Create(ctx, node); err != nil {
		s.t.Fatal(err)
	}
	s.t.Cleanup(func() { _ = s.c.Delete(context.Background(), node) })
	node.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionUnknown,
		LastTransitionTime: metav1.NewTime(s.clock.Now()), LastHeartbeatTime: metav1.NewTime(s.clock.Now())}}
	if err := s.c.Status().Update(ctx, node); err != nil {
		s.t.Fatal(err)
	}
	return node
}

// poke changes an annotation so the operator looks at the object (and its node) again: the fake clock
// moving does not wake anything.
func (s *suite) poke(lv *topolvmv1.LogicalVolume) {
	s.t.Helper()
	patch := fmt.Sprintf(`{"metadata":{"annotations":{"test.lvms.dev/poke":"%d"}}}`, s.clock.Now().Unix())
	if err := s.c.Patch(context.Background(), lv, client.RawPatch(types.MergePatchType, []byte(patch))); err != nil {
		s.t.Fatal(err)
	}
}

// stillThere checks a LogicalVolume keeps its finalizer; callers first wait for a sign that the operator
// looked at the node in the state that matters.
func (s *suite) stillThere(lv *topolvmv1.LogicalVolume, why string) {
	s.t.Helper()
	got := &topolvmv1.LogicalVolume{}
	if err := s.c.Get(context.Background(), client.ObjectKeyFromObject(lv), got); err != nil || !controllerutilContains(got.Finalizers, s.names.LogicalVolumeFinalizer()) {
		s.t.Errorf("LogicalVolume %s (%s) was released: %v, finalizers %v", lv.Name, why, err, got.Finalizers)
	}
}

func controllerutilContains(list []string, s string) bool {
	for _, f := range list {
		if f == s {
			return true
		}
	}
	return false
}

// waitEvent waits for an event about the object with uid (in any namespace: events about cluster-scoped
// objects go to "default") whose note contains every string.
func (s *suite) waitEvent(uid types.UID, contains ...string) string {
	s.t.Helper()
	var found string
	s.eventually("event containing "+strings.Join(contains, ", "), func() error {
		list := &eventsv1.EventList{}
		if err := s.c.List(context.Background(), list); err != nil {
			return err
		}
		var notes []string
		for _, e := range list.Items {
			if e.Regarding.UID != uid {
				continue
			}
			notes = append(notes, e.Note)
			ok := true
			for _, c := range contains {
				ok = ok && strings.Contains(e.Note, c)
			}
			if ok {
				found = e.Note
				return nil
			}
		}
		return fmt.Errorf("events: %q", notes)
	})
	return found
}
