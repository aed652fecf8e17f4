package testenv

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

// TestGrant: a user, group member or service account granted a rule may use it the moment Grant returns
// (the authorizer has seen the binding), only where it was granted; one never granted is reported by name.
func TestGrant(t *testing.T) {
	Require(t)
	e, err := Start()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = e.Stop() })
	as := func(user string, groups ...string) kubernetes.Interface {
		cfg := rest.CopyConfig(e.Config)
		cfg.Impersonate = rest.ImpersonationConfig{UserName: user, Groups: groups}
		return kubernetes.NewForConfigOrDie(cfg)
	}
	listNamespaces := rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"namespaces"}, Verbs: []string{"list"}}

	ctx, cancel := context.WithTimeout(t.Context(), 300*time.Millisecond)
	defer cancel()
	if err := WaitAllowed(ctx, e.Config, "", "nobody", nil, listNamespaces); err == nil || !strings.Contains(err.Error(), "nobody is still not allowed") {
		t.Errorf("waiting for a user never granted anything: %v", err)
	}
	if err := WaitAllowed(ctx, e.Config, "", "nobody", nil, rbacv1.PolicyRule{Verbs: []string{"get"}}); err != nil {
		t.Errorf("a rule naming no resource leaves nothing to wait for, got %v", err)
	}

	for i := range 10 {
		user := fmt.Sprintf("user-%d", i)
		e.Grant(t, "testenv-"+user, rbacv1.Subject{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: user}, listNamespaces)
		if _, err := as(user).CoreV1().Namespaces().List(t.Context(), metav1.ListOptions{}); err != nil {
			t.Errorf("%s right after its grant: %v", user, err)
		}
	}
	e.Grant(t, "testenv-group", rbacv1.Subject{Kind: rbacv1.GroupKind, APIGroup: rbacv1.GroupName, Name: "readers"}, listNamespaces)
	if _, err := as("dave", "readers").CoreV1().Namespaces().List(t.Context(), metav1.ListOptions{}); err != nil {
		t.Errorf("a member of the granted group: %v", err)
	}

	ns := e.Namespace(t)
	sa := rbacv1.Subject{Kind: rbacv1.ServiceAccountKind, Namespace: ns, Name: "app"}
	e.GrantIn(t, ns, "pods", sa, rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"pods"}, Verbs: []string{"list"}})
	user, groups := Identity(sa)
	app := as(user, groups...)
	if _, err := app.CoreV1().Pods(ns).List(t.Context(), metav1.ListOptions{}); err != nil {
		t.Errorf("the service account in its own namespace: %v", err)
	}
	if _, err := app.CoreV1().Pods("default").List(t.Context(), metav1.ListOptions{}); !apierrors.IsForbidden(err) {
		t.Errorf("the service account in another namespace: %v, want forbidden", err)
	}
}
