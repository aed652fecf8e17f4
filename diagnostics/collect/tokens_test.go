package collect_test

import (
	"context"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/lvms-dev/lvms/console/consoletest"
	"github.com/lvms-dev/lvms/diagnostics/collect"
	"github.com/lvms-dev/lvms/e2e/testenv"
)

// A bundle sends the node agents a token minted for lvms-bundle in their namespace, never the caller's
// own: a caller allowed to read diagnostics but without lvms-bundle gets no node views, and once the
// service account exists the views come without naming it.
func TestBundle_MintsForLVMSBundleNeverSendsTheCallersToken(t *testing.T) {
	testenv.Require(t)
	prepare(t)
	ctx := context.Background()
	// Its own agent for node A: the shared ones live only as long as the test that started them.
	startAgent(t, ctx, kubernetes.NewForConfigOrDie(env.Config), hostIP(t), preparedNS, consoletest.NodeA)
	rules := []rbacv1.PolicyRule{
		{APIGroups: []string{"*"}, Resources: []string{"*"}, Verbs: []string{"get", "list", "watch"}},
		{APIGroups: []string{"lvm.topolvm.io"}, Resources: []string{"lvmnodes/diagnostics"}, Verbs: []string{"get"}},
		{APIGroups: []string{""}, Resources: []string{"serviceaccounts/token"}, Verbs: []string{"create"}},
	}
	token, err := consoletest.UserToken(ctx, env.Config, env.Client, preparedNS, "support-engineer", rules)
	if err != nil {
		t.Fatal(err)
	}
	caller := rest.AnonymousClientConfig(env.Config)
	caller.BearerToken = token
	opts := collect.Options{Config: caller, Cluster: "envtest", Namespaces: []string{preparedNS}, Logs: fakeLogs{}}

	_, sum := collectTo(t, ctx, opts)
	agents, ok := collector(sum.Manifest, "node-agents")
	if !ok || !strings.Contains(agents.Error, preparedNS+"/lvms-bundle") {
		t.Fatalf("without lvms-bundle: node-agents collector %+v; want it to fail naming the service account (the caller's own token, which the agents would accept, is not sent)", agents)
	}

	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: collect.DefaultAgentServiceAccount, Namespace: preparedNS}}
	if err := env.Client.Create(ctx, sa); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = env.Client.Delete(context.Background(), sa) })
	binding := &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "lvms-bundle", Namespace: preparedNS},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: preparedNS + "-support-engineer"},
		Subjects: []rbacv1.Subject{{Kind: "ServiceAccount", Name: sa.Name, Namespace: preparedNS}}}
	if err := env.Client.Create(ctx, binding); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = env.Client.Delete(context.Background(), binding) })
	if err := testenv.WaitAllowed(ctx, env.Config, preparedNS, "system:serviceaccount:"+preparedNS+":"+sa.Name, nil, rules...); err != nil {
		t.Fatal(err)
	}
	_, sum = collectTo(t, ctx, opts)
	if agents, ok := collector(sum.Manifest, "node-agents"); ok {
		t.Errorf("with lvms-bundle: node-agents collector %+v; want no failure", agents)
	}
	if node, ok := collector(sum.Manifest, "node/"+consoletest.NodeA); !ok || node.Error != "" {
		t.Errorf("with lvms-bundle: collector node/%s %+v; want the view", consoletest.NodeA, node)
	}
}
