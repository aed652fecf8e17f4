package deploy

import (
	"context"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	moveapi "github.com/lvms-dev/lvms/api/move"
	"github.com/lvms-dev/lvms/e2e/testenv"
)

// TestMoveRequests_OnlyThoseWhoMayDeleteTheClaim runs the installed lvms-move-requests policy on a real API
// server: a user who may patch a claim but not delete it may not ask for its move or confirm one (a move
// deletes and creates the claim again), may still abort or withdraw one; a user who may delete it may ask.
func TestMoveRequests_OnlyThoseWhoMayDeleteTheClaim(t *testing.T) {
	testenv.Require(t)
	ctx := context.Background()
	installOverlay(t)
	ns := env.Namespace(t)
	pvc := &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "data"},
		Spec: corev1.PersistentVolumeClaimSpec{AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			Resources: corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}}}}
	if err := env.Client.Create(ctx, pvc); err != nil {
		t.Fatal(err)
	}
	patcher := claimUser(t, ns, "patcher", "get", "patch")
	owner := claimUser(t, ns, "owner", "get", "patch", "delete")
	annotate := func(c client.Client, k, v string) error {
		cur := &corev1.PersistentVolumeClaim{}
		if err := c.Get(ctx, client.ObjectKeyFromObject(pvc), cur); err != nil {
			return err
		}
		base := cur.DeepCopy()
		if cur.Annotations == nil {
			cur.Annotations = map[string]string{}
		}
		if v == "" {
			delete(cur.Annotations, k)
		} else {
			cur.Annotations[k] = v
		}
		return c.Patch(ctx, cur, client.MergeFrom(base))
	}
	// The policy takes a moment to be enforced after it is created.
	var err error
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(200 * time.Millisecond) {
		if err = annotate(patcher, moveapi.AnnotationToNode, "node-b"); err != nil {
			break
		}
		if err := annotate(env.Client, moveapi.AnnotationToNode, ""); err != nil {
			t.Fatal(err)
		}
	}
	if !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), "moving claim "+ns+"/data deletes it and creates it again: "+"patcher may not delete it") {
		t.Fatalf("a user who may not delete the claim asked for its move: %v", err)
	}
	if err := annotate(owner, moveapi.AnnotationToNode, "node-b"); err != nil {
		t.Fatalf("a user who may delete the claim may not ask for its move: %v", err)
	}
	if err := annotate(patcher, moveapi.AnnotationConfirm, "0123456789abcdef"); !apierrors.IsForbidden(err) {
		t.Fatalf("a user who may not delete the claim confirmed its move: %v", err)
	}
	if err := annotate(patcher, moveapi.AnnotationAbort, "true"); err != nil {
		t.Fatalf("a user who may patch the claim may not abort its move: %v", err)
	}
	if err := annotate(patcher, moveapi.AnnotationToNode, ""); err != nil {
		t.Fatalf("a user who may patch the claim may not withdraw the request: %v", err)
	}
	if err := annotate(patcher, "example.com/other", "x"); err != nil {
		t.Fatalf("the policy refuses other annotations: %v", err)
	}
}

// claimUser is a client of user name with verbs on the claims of ns.
func claimUser(t *testing.T, ns, name string, verbs ...string) client.Client {
	t.Helper()
	testenv.Require(t)
	role := &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Rules: []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"persistentvolumeclaims"}, Verbs: verbs}}}
	bind := &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: name},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: name}}}
	for _, o := range []client.Object{role, bind} {
		if err := env.Client.Create(context.Background(), o); err != nil {
			t.Fatal(err)
		}
	}
	cfg := rest.CopyConfig(env.Config)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: name}
	c, err := client.New(cfg, client.Options{Scheme: env.Scheme})
	if err != nil {
		t.Fatal(err)
	}
	return c
}
