package main

import (
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	authnv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/lvms-dev/lvms/e2e/testenv"
)

// The metrics endpoint serves only scrapers whose token the API server accepts and who may get /metrics:
// no token is 401, a token without the permission 403, a token bound to lvms-metrics-reader gets metrics.
func TestMetrics_RequireAnAuthorizedToken(t *testing.T) {
	testenv.Require(t)
	env, err := testenv.Start()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = env.Stop() })
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	addr := freeAddr(t)
	mgr, err := ctrl.NewManager(env.Config, ctrl.Options{Metrics: metricsOptions(addr, t.TempDir())})
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = mgr.Start(ctx) }()

	cs := kubernetes.NewForConfigOrDie(env.Config)
	ns := env.Namespace(t)
	env.Grant(t, "lvms-metrics-reader-"+ns, rbacv1.Subject{Kind: rbacv1.ServiceAccountKind, Name: "prometheus", Namespace: ns},
		rbacv1.PolicyRule{NonResourceURLs: []string{"/metrics"}, Verbs: []string{"get"}})
	token := func(sa string) string {
		if _, err := cs.CoreV1().ServiceAccounts(ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: sa}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		exp := int64(600)
		tr, err := cs.CoreV1().ServiceAccounts(ns).CreateToken(ctx, sa, &authnv1.TokenRequest{Spec: authnv1.TokenRequestSpec{ExpirationSeconds: &exp}}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return tr.Status.Token
	}
	scraper, nobody := token("prometheus"), token("nobody")

	httpc := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}} // self-signed
	scrape := func(tok string) (int, string, error) {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "https://"+addr+"/metrics", nil)
		if tok != "" {
			req.Header.Set("Authorization", "Bearer "+tok)
		}
		resp, err := httpc.Do(req)
		if err != nil {
			return 0, "", err
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(body), nil
	}
	// The server starts with the manager: wait for it to answer at all.
	var code int
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		if code, _, err = scrape(""); err == nil {
			break
		}
	}
	if err != nil || code != http.StatusUnauthorized {
		t.Fatalf("no token: %d, %v; want 401", code, err)
	}
	if code, _, err := scrape(nobody); err != nil || code != http.StatusForbidden {
		t.Errorf("a token without get /metrics: %d, %v; want 403", code, err)
	}
	if code, body, err := scrape(scraper); err != nil || code != http.StatusOK || !strings.Contains(body, "# HELP") {
		t.Errorf("the scraper's token: %d, %v, body %.100q; want metrics", code, err, body)
	}
	// controller-runtime's filter answers 500 when the TokenReview itself fails on a malformed token.
	if code, body, err := scrape("not-a-token"); err != nil || code == http.StatusOK || strings.Contains(body, "# HELP") {
		t.Errorf("a forged token: %d, %v; want a refusal", code, err)
	}
}

func freeAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return fmt.Sprint(l.Addr())
}
