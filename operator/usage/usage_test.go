package usage_test

import (
	"context"
	"errors"
	"fmt"
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

// TestUsers: a deletion is blocked by every claim of the classes and by every PV of them a claim does not
// already name — a Retained PV whose claim is gone keeps its data on the volume group, so it blocks too.
func TestUsers(t *testing.T) {
	b := fake.NewClientBuilder()
	if err := usage.SetupIndexes(context.Background(), indexer{b}); err != nil {
		t.Fatal(err)
	}
	retained := pv("pv-retained", "lvms-vg1", "a", "deleted-claim")
	retained.Spec.PersistentVolumeReclaimPolicy = corev1.PersistentVolumeReclaimRetain
	c := b.WithObjects(
		pv("pv-bound", "lvms-vg1", "a", "data"), pvc("data", "lvms-vg1", "a", "pv-bound"),
		retained,
		pv("pv-unclaimed", "lvms-vg2", "b", ""),
		pvc("other-class", "other", "", ""), pv("pv-other-class", "other", "a", ""),
	).Build()

	got, err := usage.Users(context.Background(), c, []string{"lvms-vg1", "lvms-vg2"})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		"PersistentVolume pv-retained (lvms-vg1, Retain)",
		"PersistentVolume pv-unclaimed (lvms-vg2, Delete)",
		"PersistentVolumeClaim app/data (lvms-vg1)",
	}
	if !slices.Equal(got, want) {
		t.Errorf("Users = %q, want %q", got, want)
	}
	if got, err := usage.Users(context.Background(), c, []string{"unused"}); err != nil || len(got) != 0 {
		t.Errorf("Users of an unused class = %q, %v; want none", got, err)
	}
}

func TestMessage(t *testing.T) {
	if m := usage.Message(nil, 3); m != "" {
		t.Errorf("Message without users = %q, want none", m)
	}
	users := []string{"PersistentVolume a (c, Retain)", "PersistentVolume b (c, Retain)", "PersistentVolumeClaim x/y (c)"}
	for max, want := range map[int]string{
		3: "deletion is blocked by 3 volume(s) still using the storage classes: PersistentVolume a (c, Retain); PersistentVolume b (c, Retain); PersistentVolumeClaim x/y (c); delete them",
		1: "deletion is blocked by 3 volume(s) still using the storage classes: PersistentVolume a (c, Retain) and 2 more; delete them",
	} {
		if m := usage.Message(users, max); !strings.HasPrefix(m, want) {
			t.Errorf("Message(max %d) = %q, want it to start with %q", max, m, want)
		}
	}
}

func TestPVNode(t *testing.T) {
	in := func(k string, op corev1.NodeSelectorOperator, values ...string) *corev1.PersistentVolume {
		p := pv("p", "sc", "", "")
		p.Spec.NodeAffinity.Required.NodeSelectorTerms[0].MatchExpressions = []corev1.NodeSelectorRequirement{{Key: k, Operator: op, Values: values}}
		return p
	}
	noRequired := pv("p", "sc", "a", "")
	noRequired.Spec.NodeAffinity.Required = nil
	for _, tc := range []struct {
		name string
		pv   *corev1.PersistentVolume
		want string
	}{
		{"pinned", in(key, corev1.NodeSelectorOpIn, "a"), "a"},
		{"no node affinity", &corev1.PersistentVolume{}, ""},
		{"no required affinity", noRequired, ""},
		{"another topology key", in("kubernetes.io/hostname", corev1.NodeSelectorOpIn, "a"), ""},
		{"NotIn is not a pin", in(key, corev1.NodeSelectorOpNotIn, "a"), ""},
		{"two nodes are not one", in(key, corev1.NodeSelectorOpIn, "a", "b"), ""},
	} {
		if got := usage.PVNode(tc.pv, key); got != tc.want {
			t.Errorf("%s: PVNode = %q, want %q", tc.name, got, tc.want)
		}
	}
}

// recordingIndexer keeps the extract functions, and fails when told to.
type recordingIndexer struct {
	funcs map[string]client.IndexerFunc
	fail  error
}

func (r *recordingIndexer) IndexField(_ context.Context, obj client.Object, _ string, f client.IndexerFunc) error {
	if r.fail != nil {
		return r.fail
	}
	r.funcs[fmt.Sprintf("%T", obj)] = f
	return nil
}

func TestSetupIndexes(t *testing.T) {
	r := &recordingIndexer{funcs: map[string]client.IndexerFunc{}}
	if err := usage.SetupIndexes(context.Background(), r); err != nil {
		t.Fatal(err)
	}
	empty := ""
	sc := "lvms-vg1"
	for _, tc := range []struct {
		obj  client.Object
		want []string
	}{
		{&corev1.PersistentVolumeClaim{}, nil},
		{&corev1.PersistentVolumeClaim{Spec: corev1.PersistentVolumeClaimSpec{StorageClassName: &empty}}, nil},
		{&corev1.PersistentVolumeClaim{Spec: corev1.PersistentVolumeClaimSpec{StorageClassName: &sc}}, []string{sc}},
		{&corev1.PersistentVolume{}, nil},
		{&corev1.PersistentVolume{Spec: corev1.PersistentVolumeSpec{StorageClassName: sc}}, []string{sc}},
	} {
		if got := r.funcs[fmt.Sprintf("%T", tc.obj)](tc.obj); !slices.Equal(got, tc.want) {
			t.Errorf("%T %+v indexed under %q, want %q", tc.obj, tc.obj, got, tc.want)
		}
	}
	r.fail = errors.New("cache stopped")
	if err := usage.SetupIndexes(context.Background(), r); err == nil || !strings.Contains(err.Error(), "cache stopped") {
		t.Errorf("SetupIndexes with a failing indexer = %v, want its error", err)
	}
}
