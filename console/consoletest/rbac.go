package consoletest

import (
	"context"
	"fmt"

	authnv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/lvms-dev/lvms/e2e/testenv"
)

// UserToken creates a ServiceAccount name in ns, a ClusterRole and ClusterRoleBinding granting it exactly
// rules (none when rules is empty), and returns a bearer token for it from the TokenRequest API: a real,
// RBAC-restricted user of the API server at cfg, once its rules have reached the authorizer.
func UserToken(ctx context.Context, cfg *rest.Config, c client.Client, ns, name string, rules []rbacv1.PolicyRule) (string, error) {
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}}
	if err := c.Create(ctx, sa); err != nil {
		return "", fmt.Errorf("create service account %s/%s: %w", ns, name, err)
	}
	role := ns + "-" + name
	if len(rules) > 0 {
		if err := c.Create(ctx, &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: role}, Rules: rules}); err != nil {
			return "", fmt.Errorf("create cluster role %s: %w", role, err)
		}
		if err := c.Create(ctx, &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: role},
			RoleRef:  rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: role},
			Subjects: []rbacv1.Subject{{Kind: "ServiceAccount", Namespace: ns, Name: name}}}); err != nil {
			return "", fmt.Errorf("bind cluster role %s: %w", role, err)
		}
		user, groups := testenv.Identity(rbacv1.Subject{Kind: rbacv1.ServiceAccountKind, Namespace: ns, Name: name})
		if err := testenv.WaitAllowed(ctx, cfg, "", user, groups, rules...); err != nil {
			return "", err
		}
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return "", fmt.Errorf("clientset: %w", err)
	}
	tr, err := cs.CoreV1().ServiceAccounts(ns).CreateToken(ctx, name, &authnv1.TokenRequest{}, metav1.CreateOptions{})
	if err != nil {
		return "", fmt.Errorf("request a token for %s/%s: %w", ns, name, err)
	}
	return tr.Status.Token, nil
}
