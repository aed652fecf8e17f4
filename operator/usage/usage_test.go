package usage_test

import (
	"context"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/lvms-dev/lvms/operator/usage"
)

const key = "topology.topolvm.io/node"

// indexer registers the package's indexes on a fake client builder.
type indexer struct{ b *fake.ClientBuilder }

func (i indexer) IndexField(_ context.Context, obj client.Object, field string, f client.IndexerFunc) error {
	i.b.WithIndex(obj, field, f)
	return nil
}

func pv(name, sc, node string, claim string) *corev1.PersistentVolume {
	p := &corev1.PersistentVolume{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: corev1.PersistentVolumeSpec{
		StorageClassName: sc, PersistentVolumeReclaimPolicy: corev1.PersistentVolumeReclaimDelete,
		NodeAffinity: &corev1.VolumeNodeAffinity{Required: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{
			MatchExpressions: []corev1.NodeSelectorRequirement{{Key: key, Operator: corev1.NodeSelectorOpIn, Values: []string{node}}},
		}}}},
	}}
	if claim != "" {
		p.Spec.ClaimRef = &corev1.ObjectReference{Namespace: "app", Name: claim}
	}
	return p
}

func pvc(name, sc, selectedNode, volume string) *corev1.PersistentVolumeClaim {
	c := &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "app", Name: name}, Spec: corev1.PersistentVolumeClaimSpec{
		StorageClassName: &sc, VolumeName: volume,
	}}
	if selectedNode != "" {
		c.Annotations = map[string]string{"volume.kubernetes.io/selected-node": selectedNode}
	}
	return c
}

// TestNodeBlockers: only what lives on the node, in the classes asked about, blocks its volume groups; a
// bound claim is named once (by its PV), a claim being provisioned there is named too.
func TestNodeBlockers(t *testing.T) {
	b := fake.NewClientBuilder()
	if err := usage.SetupIndexes(context.Background(), indexer{b}); err != nil {
		t.Fatal(err)
	}
	c := b.WithObjects(
		pv("pv-bound", "lvms-vg1", "a", "data"), pvc("data", "lvms-vg1", "a", "pv-bound"),
		pv("pv-released", "lvms-vg1", "a", ""),
		pvc("pending", "lvms-vg1", "a", ""),
		pv("pv-other-node", "lvms-vg1", "b", "elsewhere"),
		pvc("pending-other-node", "lvms-vg1", "b", ""),
		pv("pv-other-class", "lvms-vg2", "a", "other-class"),
	).Build()

	got, err := usage.NodeUsers(context.Background(), c, []string{"lvms-vg1"}, "a", key)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		"PersistentVolume pv-released (lvms-vg1, Delete)",
		"PersistentVolumeClaim app/data (lvms-vg1, PersistentVolume pv-bound)",
		"PersistentVolumeClaim app/pending (lvms-vg1, being provisioned)",
	}
	if !slices.Equal(got, want) {
		t.Errorf("NodeUsers = %q, want %q", got, want)
	}

	msg, err := usage.NodeBlockers(context.Background(), c, []string{"lvms-vg1"}, "a", key, 2)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{"node a", "3 volume(s)", "and 1 more", "select the node again"} {
		if !strings.Contains(msg, s) {
			t.Errorf("NodeBlockers = %q, want it to contain %q", msg, s)
		}
	}
	if msg, err := usage.NodeBlockers(context.Background(), c, []string{"lvms-vg1"}, "c", key, 2); err != nil || msg != "" {
		t.Errorf("NodeBlockers of a node without volumes = %q, %v; want none", msg, err)
	}
}
