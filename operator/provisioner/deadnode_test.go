package provisioner_test

import (
	"context"
	"fmt"
	"testing"

	corev1 "k8s.io/api/core/v1"
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
		lv.Status.VolumeID = "dead-volume-" + fmt.Sprint(i)
		if err := s.c.Status().Update(ctx, lv); err != nil {
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
		s.eventually("node A's released PV deleted while the dead node's deletions hang", func() error {
			err := s.c.Get(ctx, client.ObjectKeyFromObject(pv), pv)
			switch {
			case apierrors.IsNotFound(err):
				return nil
			case err != nil:
				return err
			case pv.DeletionTimestamp != nil:
				return s.c.Patch(ctx, pv, client.RawPatch(types.MergePatchType, []byte(`{"metadata":{"finalizers":null}}`)))
			}
			return fmt.Errorf("PV %s is not being deleted", pv.Name)
		})
	}
	t.Logf("event: %s", s.waitWarning(waiting[0], "node agent", dead, "did not answer", "retried with backoff"))
}

// releasedPV creates a PV (reclaim Delete) on node whose claim is gone.
func (s *suite) releasedPV(name, handle, sc, node string) {
	s.t.Helper()
	mode := corev1.PersistentVolumeFilesystem
	pv := &corev1.PersistentVolume{ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: corev1.PersistentVolumeSpec{Capacity: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")},
			AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce}, PersistentVolumeReclaimPolicy: corev1.PersistentVolumeReclaimDelete,
			StorageClassName: sc, VolumeMode: &mode,
			ClaimRef:               &corev1.ObjectReference{Namespace: s.ns, Name: "gone-" + name, UID: types.UID("gone-" + name)},
			PersistentVolumeSource: corev1.PersistentVolumeSource{CSI: &corev1.CSIPersistentVolumeSource{Driver: s.names.Driver(), VolumeHandle: handle}},
			NodeAffinity: &corev1.VolumeNodeAffinity{Required: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchExpressions: []corev1.NodeSelectorRequirement{
				{Key: s.names.TopologyKey(), Operator: corev1.NodeSelectorOpIn, Values: []string{node}}}}}}}}}
	if err := s.c.Create(context.Background(), pv); err != nil {
		s.t.Fatal(err)
	}
	s.t.Cleanup(func() {
		_ = s.c.Patch(context.Background(), pv, client.RawPatch(types.MergePatchType, []byte(`{"metadata":{"finalizers":null}}`)))
		_ = s.c.Delete(context.Background(), pv)
	})
}
