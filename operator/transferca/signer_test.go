package transferca_test

import (
	"os"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"
	certv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	clocktesting "k8s.io/utils/clock/testing"
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/lvms-dev/lvms/e2e/testenv"
	"github.com/lvms-dev/lvms/nodeagent/blockcopy"
	"github.com/lvms-dev/lvms/operator/transferca"
)

var env *testenv.Env

func TestMain(m *testing.M) {
	ctrl.SetLogger(logr.Discard())
	os.Exit(testenv.Main(m, &env))
}

var now = time.Date(2026, 6, 1, 12, 0, 0, 0, time.UTC)

// as returns a client that acts as user, with the node its token is bound to (none when node is "").
func as(t *testing.T, user, node string) kubernetes.Interface {
	t.Helper()
	testenv.Require(t)
	cfg := rest.CopyConfig(env.Config)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: user, Groups: []string{"system:authenticated"}}
	if node != "" {
		cfg.Impersonate.Extra = map[string][]string{transferca.NodeNameExtra: {node}}
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return cs
}

// allowCSRs lets every authenticated user create CertificateSigningRequests (as the agent's RBAC would
// let the agent), so that the signer, not RBAC, is what these tests exercise.
func allowCSRs(t *testing.T) {
	t.Helper()
	testenv.Require(t)
	env.Grant(t, "test-csr-create", rbacv1.Subject{Kind: rbacv1.GroupKind, APIGroup: rbacv1.GroupName, Name: "system:authenticated"}, rbacv1.PolicyRule{
		APIGroups: []string{"certificates.k8s.io"}, Resources: []string{"certificatesigningrequests"}, Verbs: []string{"create", "get"}})
}

// request creates a CSR for node's certificate as cs and returns its name and the key.
func request(t *testing.T, cs kubernetes.Interface, node, signer string) (string, []byte) {
	t.Helper()
	testenv.Require(t)
	key, csrPEM, err := blockcopy.NewKeyAndRequest(node)
	if err != nil {
		t.Fatal(err)
	}
	csr := &certv1.CertificateSigningRequest{ObjectMeta: metav1.ObjectMeta{GenerateName: "lvms-transfer-"},
		Spec: certv1.CertificateSigningRequestSpec{Request: csrPEM, SignerName: signer,
			Usages: []certv1.KeyUsage{certv1.UsageDigitalSignature, certv1.UsageClientAuth, certv1.UsageServerAuth}}}
	got, err := cs.CertificatesV1().CertificateSigningRequests().Create(t.Context(), csr, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = env.Client.Delete(t.Context(), got) })
	return got.Name, key
}

func get(t *testing.T, name string) *certv1.CertificateSigningRequest {
	t.Helper()
	testenv.Require(t)
	csr := &certv1.CertificateSigningRequest{}
	if err := env.Client.Get(t.Context(), types.NamespacedName{Name: name}, csr); err != nil {
		t.Fatal(err)
	}
	return csr
}

func condition(csr *certv1.CertificateSigningRequest, typ certv1.RequestConditionType) *certv1.CertificateSigningRequestCondition {
	for i := range csr.Status.Conditions {
		if csr.Status.Conditions[i].Type == typ {
			return &csr.Status.Conditions[i]
		}
	}
	return nil
}

func TestSigner_SignsOnlyForTheNodeTheAgentsTokenIsBoundTo(t *testing.T) {
	testenv.Require(t)
	allowCSRs(t)
	ns := env.Namespace(t)
	agentUser := "system:serviceaccount:" + ns + ":lvms-node-agent"
	admin, err := kubernetes.NewForConfig(env.Config)
	if err != nil {
		t.Fatal(err)
	}
	s := &transferca.Signer{Client: env.Client, Approvals: admin, Namespace: ns, AgentUser: agentUser, Clock: clocktesting.NewFakeClock(now)}

	// The agent on node-a asks for node-a: approved, signed, the CA follows the certificate.
	name, key := request(t, as(t, agentUser, "node-a"), "node-a", transferca.SignerName)
	if err := s.Reconcile(t.Context(), name); err != nil {
		t.Fatal(err)
	}
	csr := get(t, name)
	if c := condition(csr, certv1.CertificateApproved); c == nil || !strings.Contains(c.Message, "node node-a") {
		t.Fatalf("request of node-a's agent: conditions %+v", csr.Status.Conditions)
	}
	certPEM, caPEM, err := blockcopy.SplitIssued(csr.Status.Certificate)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := blockcopy.LoadIdentity("node-a", key, certPEM, caPEM, clocktesting.NewFakePassiveClock(now)); err != nil {
		t.Fatalf("the issued certificate does not make node-a's identity: %v", err)
	}
	sec := &corev1.Secret{}
	if err := env.Client.Get(t.Context(), types.NamespacedName{Namespace: ns, Name: transferca.SecretName}, sec); err != nil {
		t.Fatalf("the CA Secret: %v", err)
	}
	if string(sec.Data[corev1.TLSCertKey]) != string(caPEM) {
		t.Error("the CA sent with the certificate is not the CA in the Secret")
	}

	// A second request is signed by the same CA.
	name2, _ := request(t, as(t, agentUser, "node-c"), "node-c", transferca.SignerName)
	if err := s.Reconcile(t.Context(), name2); err != nil {
		t.Fatal(err)
	}
	if _, ca2, err := blockcopy.SplitIssued(get(t, name2).Status.Certificate); err != nil || string(ca2) != string(caPEM) {
		t.Errorf("the second certificate is not from the same CA (%v)", err)
	}

	refused := []struct {
		name, user, boundNode, forNode, want string
	}{
		{"the agent on node-b asking for node-a", agentUser, "node-b", "node-a", "must name exactly lvms-node://node/node-b"},
		{"another ServiceAccount bound to node-a", "system:serviceaccount:" + ns + ":builder", "node-a", "node-a", "only the node agent"},
		{"the agent's user without a bound node", agentUser, "", "node-a", "bound to no node"},
	}
	for _, tc := range refused {
		t.Run(tc.name, func(t *testing.T) {
			name, _ := request(t, as(t, tc.user, tc.boundNode), tc.forNode, transferca.SignerName)
			if err := s.Reconcile(t.Context(), name); err != nil {
				t.Fatal(err)
			}
			csr := get(t, name)
			if c := condition(csr, certv1.CertificateDenied); c == nil || !strings.Contains(c.Message, tc.want) {
				t.Fatalf("conditions %+v, want Denied with %q", csr.Status.Conditions, tc.want)
			}
			if condition(csr, certv1.CertificateApproved) != nil || len(csr.Status.Certificate) > 0 {
				t.Fatal("a refused request was approved or got a certificate")
			}
		})
	}

	t.Run("a request for another signer is left alone", func(t *testing.T) {
		name, _ := request(t, as(t, agentUser, "node-a"), "node-a", "example.com/other")
		if err := s.Reconcile(t.Context(), name); err != nil {
			t.Fatal(err)
		}
		if csr := get(t, name); len(csr.Status.Conditions) > 0 || len(csr.Status.Certificate) > 0 {
			t.Fatalf("the signer touched another signer's request: %+v", csr.Status)
		}
	})
}

// TestSigner_CAKeptRenewedAndRepaired: the CA stays the same while it has time left, is replaced (in its
// Secret, and for the certificates signed from then on) once it expires within a certificate's lifetime, and a
// Secret that no longer holds a CA stops signing with an error that says to delete it.
func TestSigner_CAKeptRenewedAndRepaired(t *testing.T) {
	testenv.Require(t)
	allowCSRs(t)
	ns := env.Namespace(t)
	agentUser := "system:serviceaccount:" + ns + ":lvms-node-agent"
	admin, err := kubernetes.NewForConfig(env.Config)
	if err != nil {
		t.Fatal(err)
	}
	clk := clocktesting.NewFakeClock(now)
	s := &transferca.Signer{Client: env.Client, Approvals: admin, Namespace: ns, AgentUser: agentUser, Clock: clk}
	sign := func() (cert, ca []byte) {
		t.Helper()
		name, _ := request(t, as(t, agentUser, "node-a"), "node-a", transferca.SignerName)
		if err := s.Reconcile(t.Context(), name); err != nil {
			t.Fatal(err)
		}
		cert, ca, err := blockcopy.SplitIssued(get(t, name).Status.Certificate)
		if err != nil {
			t.Fatal(err)
		}
		return cert, ca
	}
	secret := func() *corev1.Secret {
		t.Helper()
		sec := &corev1.Secret{}
		if err := env.Client.Get(t.Context(), types.NamespacedName{Namespace: ns, Name: transferca.SecretName}, sec); err != nil {
			t.Fatal(err)
		}
		return sec
	}

	_, first := sign()
	old, err := transferca.Parse(first, secret().Data[corev1.TLSPrivateKeyKey], clk)
	if err != nil {
		t.Fatal(err)
	}
	clk.SetTime(old.Cert.NotAfter.Add(-transferca.CertTTL - time.Hour))
	if _, ca := sign(); string(ca) != string(first) {
		t.Fatal("the CA was replaced while it had more than a certificate's lifetime left")
	}
	clk.SetTime(old.Cert.NotAfter.Add(-transferca.CertTTL + time.Hour))
	_, renewed := sign()
	if string(renewed) == string(first) {
		t.Fatal("a CA that expires within a certificate's lifetime still signs")
	}
	if got := secret().Data[corev1.TLSCertKey]; string(got) != string(renewed) {
		t.Error("the renewed CA is not the one in the Secret")
	}

	sec := secret()
	sec.Data[corev1.TLSPrivateKeyKey] = []byte("lost")
	if err := env.Client.Update(t.Context(), sec); err != nil {
		t.Fatal(err)
	}
	name, _ := request(t, as(t, agentUser, "node-a"), "node-a", transferca.SignerName)
	if err := s.Reconcile(t.Context(), name); err == nil || !strings.Contains(err.Error(), "delete it") {
		t.Errorf("a Secret without a CA: %v, want an error saying to delete it", err)
	}
	if csr := get(t, name); len(csr.Status.Certificate) > 0 || len(csr.Status.Conditions) > 0 {
		t.Errorf("a request decided without a CA: %+v", csr.Status)
	}
	if got := secret().Data[corev1.TLSPrivateKeyKey]; string(got) != "lost" {
		t.Error("the operator replaced a CA Secret it could not read (the agents' certificates would stop verifying unannounced)")
	}
}

// TestSigner_ApprovedButNotSigned: a request approved before the operator issued its certificate (an operator
// restarted in between, or an admin who approved it by hand) gets its certificate, approved once.
func TestSigner_ApprovedButNotSigned(t *testing.T) {
	testenv.Require(t)
	allowCSRs(t)
	ns := env.Namespace(t)
	agentUser := "system:serviceaccount:" + ns + ":lvms-node-agent"
	admin, err := kubernetes.NewForConfig(env.Config)
	if err != nil {
		t.Fatal(err)
	}
	s := &transferca.Signer{Client: env.Client, Approvals: admin, Namespace: ns, AgentUser: agentUser, Clock: clocktesting.NewFakeClock(now)}
	name, _ := request(t, as(t, agentUser, "node-a"), "node-a", transferca.SignerName)
	csr := get(t, name)
	csr.Status.Conditions = append(csr.Status.Conditions, certv1.CertificateSigningRequestCondition{
		Type: certv1.CertificateApproved, Status: corev1.ConditionTrue, Reason: "ByHand", Message: "approved by an admin"})
	if _, err := admin.CertificatesV1().CertificateSigningRequests().UpdateApproval(t.Context(), name, csr, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := s.Reconcile(t.Context(), name); err != nil {
		t.Fatal(err)
	}
	csr = get(t, name)
	if len(csr.Status.Certificate) == 0 {
		t.Fatal("an approved request got no certificate")
	}
	if len(csr.Status.Conditions) != 1 || csr.Status.Conditions[0].Reason != "ByHand" {
		t.Errorf("conditions %+v, want the one approval", csr.Status.Conditions)
	}
}
