package transfercert_test

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"
	certv1 "k8s.io/api/certificates/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/lvms-dev/lvms/e2e/testenv"
	"github.com/lvms-dev/lvms/nodeagent/transfercert"
	"github.com/lvms-dev/lvms/operator/transferca"
)

var env *testenv.Env

func TestMain(m *testing.M) {
	ctrl.SetLogger(logr.Discard())
	os.Exit(testenv.Main(m, &env))
}

// agentClient acts as the node agent's ServiceAccount with a token bound to node, allowed to create and
// read CertificateSigningRequests (what the agent's RBAC would grant).
func agentClient(t *testing.T, user, node string) kubernetes.Interface {
	t.Helper()
	testenv.Require(t)
	env.Grant(t, "transfercert-"+node, rbacv1.Subject{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: user}, rbacv1.PolicyRule{
		APIGroups: []string{"certificates.k8s.io"}, Resources: []string{"certificatesigningrequests"}, Verbs: []string{"create", "get"}})
	cfg := rest.CopyConfig(env.Config)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: user, Extra: map[string][]string{transferca.NodeNameExtra: {node}}}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return cs
}

// runSigner plays the operator: it answers every request until the test ends.
func runSigner(t *testing.T, ns, agentUser string) {
	t.Helper()
	testenv.Require(t)
	admin, err := kubernetes.NewForConfig(env.Config)
	if err != nil {
		t.Fatal(err)
	}
	s := &transferca.Signer{Client: env.Client, Approvals: admin, Namespace: ns, AgentUser: agentUser, Clock: clock.RealClock{}}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	t.Cleanup(func() { cancel(); <-done })
	go func() {
		defer close(done)
		for ctx.Err() == nil {
			list := &certv1.CertificateSigningRequestList{}
			if err := env.Client.List(ctx, list); err == nil {
				for _, csr := range list.Items {
					_ = s.Reconcile(ctx, csr.Name)
				}
			}
			select {
			case <-ctx.Done():
			case <-time.After(50 * time.Millisecond):
			}
		}
	}()
}

func TestRequester_GetsItsOwnNodesCertificateOnly(t *testing.T) {
	testenv.Require(t)
	ns := env.Namespace(t)
	agentUser := "system:serviceaccount:" + ns + ":lvms-node-agent"
	runSigner(t, ns, agentUser)
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()

	r := &transfercert.Requester{Client: agentClient(t, agentUser, "node-a"), Node: "node-a", Clock: clock.RealClock{}, Poll: 50 * time.Millisecond}
	id, err := r.Identity(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if id.Node() != "node-a" || !id.NotAfter().After(time.Now()) {
		t.Fatalf("identity for %s until %s", id.Node(), id.NotAfter())
	}

	// An agent whose token is bound to node-b cannot get node-a's certificate.
	r = &transfercert.Requester{Client: agentClient(t, agentUser, "node-b"), Node: "node-a", Clock: clock.RealClock{}, Poll: 50 * time.Millisecond}
	_, err = r.Identity(ctx)
	if err == nil || !strings.Contains(err.Error(), "the operator refused the transfer certificate of node node-a") || !strings.Contains(err.Error(), "lvms-node://node/node-b") {
		t.Fatalf("node-b's agent asking for node-a: %v", err)
	}
}
