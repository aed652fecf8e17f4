package transferca

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"net/url"
	"strings"
	"testing"
	"time"

	clocktesting "k8s.io/utils/clock/testing"

	"github.com/lvms-dev/lvms/nodeagent/blockcopy"
)

const agent = "system:serviceaccount:lvms:lvms-node-agent"

var start = time.Date(2026, 6, 1, 12, 0, 0, 0, time.UTC)

func csrPEM(t *testing.T, key any, tmpl *x509.CertificateRequest) []byte {
	t.Helper()
	der, err := x509.CreateCertificateRequest(rand.Reader, tmpl, key)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE REQUEST", Bytes: der})
}

func bound(node string) map[string][]string { return map[string][]string{NodeNameExtra: {node}} }

func TestSign_IssuesAShortLivedCertificateForTheRequestersNode(t *testing.T) {
	clk := clocktesting.NewFakeClock(start)
	ca, err := New(clk)
	if err != nil {
		t.Fatal(err)
	}
	_, req, err := blockcopy.NewKeyAndRequest("node-a")
	if err != nil {
		t.Fatal(err)
	}
	certPEM, node, err := ca.Sign(Request{CSR: req, Username: agent, Extra: bound("node-a")}, agent)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := pem.Decode(certPEM)
	cert, err := x509.ParseCertificate(b.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	if got, err := blockcopy.NodeName(cert); node != "node-a" || got != "node-a" || err != nil {
		t.Errorf("certificate for node %q (Sign said %q, %v), want node-a", got, node, err)
	}
	if !cert.NotAfter.Equal(start.Add(CertTTL)) {
		t.Errorf("certificate valid until %s, want %s", cert.NotAfter, start.Add(CertTTL))
	}
	roots := x509.NewCertPool()
	roots.AddCert(ca.Cert)
	for _, usage := range []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth, x509.ExtKeyUsageServerAuth} {
		if _, err := cert.Verify(x509.VerifyOptions{Roots: roots, CurrentTime: start, KeyUsages: []x509.ExtKeyUsage{usage}}); err != nil {
			t.Errorf("certificate does not verify for %v: %v", usage, err)
		}
	}
	if _, err := cert.Verify(x509.VerifyOptions{Roots: roots, CurrentTime: start.Add(CertTTL + time.Minute)}); err == nil {
		t.Error("certificate still verifies after its TTL")
	}
}

func TestSign_Refuses(t *testing.T) {
	ca, err := New(clocktesting.NewFakeClock(start))
	if err != nil {
		t.Fatal(err)
	}
	ec, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	ec384, _ := ecdsa.GenerateKey(elliptic.P384(), rand.Reader)
	rsaKey, _ := rsa.GenerateKey(rand.Reader, 2048)
	nodeA := []*url.URL{blockcopy.NodeURI("node-a")}
	_, good, _ := blockcopy.NewKeyAndRequest("node-a")
	cases := []struct {
		name string
		req  Request
		want string
	}{
		{"a request from someone else than the node agent", Request{CSR: good, Username: "system:serviceaccount:default:builder", Extra: bound("node-a")},
			`requested by "system:serviceaccount:default:builder": only the node agent`},
		{"a token bound to no node", Request{CSR: good, Username: agent},
			"the request's token is bound to no node"},
		{"the agent on node-b asking for node-a", Request{CSR: good, Username: agent, Extra: bound("node-b")},
			"must name exactly lvms-node://node/node-b (the node the requester's token is bound to) and nothing else"},
		{"a request for a node and a DNS name", Request{CSR: csrPEM(t, ec, &x509.CertificateRequest{URIs: nodeA, DNSNames: []string{"api.example.com"}}), Username: agent, Extra: bound("node-a")},
			"must name exactly lvms-node://node/node-a"},
		{"a request for two nodes", Request{CSR: csrPEM(t, ec, &x509.CertificateRequest{URIs: append(nodeA, blockcopy.NodeURI("node-b"))}), Username: agent, Extra: bound("node-a")},
			"must name exactly lvms-node://node/node-a"},
		{"an RSA key", Request{CSR: csrPEM(t, rsaKey, &x509.CertificateRequest{URIs: nodeA}), Username: agent, Extra: bound("node-a")},
			"the key must be ECDSA P-256"},
		{"a P-384 key", Request{CSR: csrPEM(t, ec384, &x509.CertificateRequest{Subject: pkix.Name{CommonName: "x"}, URIs: nodeA}), Username: agent, Extra: bound("node-a")},
			"the key must be ECDSA P-256"},
		{"no PEM", Request{CSR: []byte("hello"), Username: agent, Extra: bound("node-a")},
			"spec.request holds no PEM certificate request"},
		{"two node names in the token", Request{CSR: good, Username: agent, Extra: map[string][]string{NodeNameExtra: {"node-a", "node-b"}}},
			"bound to no node"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cert, _, err := ca.Sign(tc.req, agent)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Sign: %v, want an error containing %q", err, tc.want)
			}
			if cert != nil {
				t.Error("a certificate was issued with the refusal")
			}
		})
	}
}

func TestParse_RoundTripsAndRenewsBeforeExpiry(t *testing.T) {
	clk := clocktesting.NewFakeClock(start)
	ca, err := New(clk)
	if err != nil {
		t.Fatal(err)
	}
	c, k, err := ca.PEM()
	if err != nil {
		t.Fatal(err)
	}
	back, err := Parse(c, k, clk)
	if err != nil {
		t.Fatal(err)
	}
	if !back.Cert.Equal(ca.Cert) || back.NeedsRenewal() {
		t.Fatalf("parsed CA differs or already needs renewal")
	}
	clk.SetTime(ca.Cert.NotAfter.Add(-CertTTL + time.Minute))
	if !back.NeedsRenewal() {
		t.Error("a CA that expires within a certificate's TTL does not ask for renewal")
	}
	other, _ := New(clk)
	_, k2, _ := other.PEM()
	if _, err := Parse(c, k2, clk); err == nil || !strings.Contains(err.Error(), "not a CA certificate for tls.key") {
		t.Errorf("Parse with another CA's key: %v", err)
	}
	if _, err := Parse([]byte("x"), k, clk); err == nil {
		t.Error("Parse accepted a certificate that is not PEM")
	}
}

// TestParse_RefusesAKeyThatIsNotAnECKey: a CA Secret whose tls.key is not a PEM EC private key is refused
// with an error naming tls.key (the signer then says to delete the Secret), never read as some other key.
func TestParse_RefusesAKeyThatIsNotAnECKey(t *testing.T) {
	clk := clocktesting.NewFakeClock(start)
	ca, err := New(clk)
	if err != nil {
		t.Fatal(err)
	}
	c, k, err := ca.PEM()
	if err != nil {
		t.Fatal(err)
	}
	block, _ := pem.Decode(k)
	for name, key := range map[string][]byte{
		"not PEM":               []byte("not a key"),
		"empty":                 nil,
		"PEM of another type":   pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: block.Bytes}),
		"EC key PEM of garbage": pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: []byte("garbage")}),
	} {
		if _, err := Parse(c, key, clk); err == nil || !strings.Contains(err.Error(), "tls.key") {
			t.Errorf("%s: %v, want an error naming tls.key", name, err)
		}
	}
}
