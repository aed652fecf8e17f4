package testenv

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	authzv1 "k8s.io/api/authorization/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Grant creates a ClusterRole name holding rules, binds it to subject, deletes both when the test ends, and
// returns once the API server allows subject what the first rule names. The RBAC authorizer reads roles and
// bindings through informers, so a request made straight after the binding is created can still be refused:
// CI saw a test fail with "forbidden" 20 ms after its binding.
func (e *Env) Grant(t testing.TB, name string, subject rbacv1.Subject, rules ...rbacv1.PolicyRule) {
	t.Helper()
	e.grant(t, "", name, subject, rules)
}

// GrantIn is Grant with a Role and RoleBinding in namespace ns.
func (e *Env) GrantIn(t testing.TB, ns, name string, subject rbacv1.Subject, rules ...rbacv1.PolicyRule) {
	t.Helper()
	e.grant(t, ns, name, subject, rules)
}

func (e *Env) grant(t testing.TB, ns, name string, subject rbacv1.Subject, rules []rbacv1.PolicyRule) {
	t.Helper()
	meta, subjects := metav1.ObjectMeta{Name: name, Namespace: ns}, []rbacv1.Subject{subject}
	ref := func(kind string) rbacv1.RoleRef {
		return rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: kind, Name: name}
	}
	var role, bind client.Object = &rbacv1.ClusterRole{ObjectMeta: meta, Rules: rules},
		&rbacv1.ClusterRoleBinding{ObjectMeta: meta, RoleRef: ref("ClusterRole"), Subjects: subjects}
	if ns != "" {
		role, bind = &rbacv1.Role{ObjectMeta: meta, Rules: rules}, &rbacv1.RoleBinding{ObjectMeta: meta, RoleRef: ref("Role"), Subjects: subjects}
	}
	for _, o := range []client.Object{role, bind} {
		if err := e.Client.Create(t.Context(), o); err != nil {
			t.Fatalf("grant %s: %v", name, err)
		}
		t.Cleanup(func() { _ = e.Client.Delete(context.Background(), o) }) // t.Context() is done by then
	}
	user, groups := Identity(subject)
	if err := WaitAllowed(t.Context(), e.Config, ns, user, groups, rules...); err != nil {
		t.Fatalf("grant %s: %v", name, err)
	}
}

// Identity is the user name and groups the API server authenticates subject as (a ServiceAccount's token, a
// user, or any member of a group).
func Identity(subject rbacv1.Subject) (string, []string) {
	switch subject.Kind {
	case rbacv1.ServiceAccountKind:
		return "system:serviceaccount:" + subject.Namespace + ":" + subject.Name,
			[]string{"system:serviceaccounts", "system:serviceaccounts:" + subject.Namespace, "system:authenticated"}
	case rbacv1.GroupKind:
		return "lvms-testenv-member-of-" + subject.Name, []string{subject.Name}
	default:
		return subject.Name, nil
	}
}

// WaitAllowed polls a SubjectAccessReview (as cfg's user, in namespace ns or, when ns is empty, at cluster
// scope) until user in groups may do what the first rule naming a verb and a resource or URL allows, for up
// to 30 s. Rules that name neither (or none at all) leave nothing to wait for.
func WaitAllowed(ctx context.Context, cfg *rest.Config, ns, user string, groups []string, rules ...rbacv1.PolicyRule) error {
	spec := authzv1.SubjectAccessReviewSpec{User: user, Groups: groups}
	for _, rule := range rules {
		if len(rule.Verbs) == 0 {
			continue
		}
		if len(rule.NonResourceURLs) > 0 {
			spec.NonResourceAttributes = &authzv1.NonResourceAttributes{Path: rule.NonResourceURLs[0], Verb: rule.Verbs[0]}
			break
		}
		if len(rule.Resources) > 0 && len(rule.APIGroups) > 0 {
			res, sub, _ := strings.Cut(rule.Resources[0], "/")
			spec.ResourceAttributes = &authzv1.ResourceAttributes{Group: rule.APIGroups[0], Resource: res, Subresource: sub, Verb: rule.Verbs[0], Namespace: ns}
			if len(rule.ResourceNames) > 0 {
				spec.ResourceAttributes.Name = rule.ResourceNames[0]
			}
			break
		}
	}
	if spec.NonResourceAttributes == nil && spec.ResourceAttributes == nil {
		return nil
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
	var last string
	err = wait.PollUntilContextTimeout(ctx, 20*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		r, err := cs.AuthorizationV1().SubjectAccessReviews().Create(ctx, &authzv1.SubjectAccessReview{Spec: spec}, metav1.CreateOptions{})
		if err != nil {
			last = err.Error()
			return false, nil
		}
		last = r.Status.Reason
		return r.Status.Allowed, nil
	})
	if err != nil {
		return fmt.Errorf("%s is still not allowed %+v (last answer: %q): %w", user, spec, last, err)
	}
	return nil
}
