package laststatus

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8stypes "k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

type status struct{ State string }

func (s *status) DeepCopy() *status { c := *s; return &c }

func object(uid, rv string) *corev1.ConfigMap {
	return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "a", UID: k8stypes.UID("u" + uid), ResourceVersion: rv}}
}

func TestMemory(t *testing.T) {
	var m Memory[*status]
	if _, ok := m.Recall(object("1", "10")); ok {
		t.Fatal("an empty memory recalled a status")
	}
	written := &status{State: "Ready"}
	m.Remember(object("1", "11"), "10", written)
	written.State = "changed by the caller afterwards"

	got, ok := m.Recall(object("1", "10"))
	if !ok || got.State != "Ready" {
		t.Fatalf("the cache still shows version 10, the write's base: recalled %v, %v; want the written status Ready", got, ok)
	}
	got.State = "changed by the reconcile"
	if again, _ := m.Recall(object("1", "10")); again.State != "Ready" {
		t.Errorf("a recalled status is shared with the memory: second recall %q", again.State)
	}
	for _, o := range []client.Object{object("1", "11"), object("1", "12"), object("2", "10")} {
		if _, ok := m.Recall(o); ok {
			t.Errorf("recalled for uid %s version %s; want nothing (the cache has seen the write, a newer one, or another object of the name)", o.GetUID(), o.GetResourceVersion())
		}
	}
	m.Forget(client.ObjectKeyFromObject(object("1", "10")))
	if _, ok := m.Recall(object("1", "10")); ok {
		t.Error("recalled after Forget")
	}
}
