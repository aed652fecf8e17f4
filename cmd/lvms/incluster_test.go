package main

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/cert"
	clocktesting "k8s.io/utils/clock/testing"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	"github.com/lvms-dev/lvms/console/consoletest"
	"github.com/lvms-dev/lvms/console/live"
	"github.com/lvms-dev/lvms/e2e/testenv"
	"github.com/lvms-dev/lvms/web"
)

// lockedBuffer collects a command's log while it runs.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}
func (l *lockedBuffer) String() string { l.mu.Lock(); defer l.mu.Unlock(); return l.b.String() }

// `lvms operator --console-bind-address` serves the console in the cluster as the Deployment runs it: HTTPS
// with the certificate of --console-cert-dir (picked up when the service CA writes it, and when it rotates),
// a bearer token required for every read, each caller seeing what their RBAC allows, and the console
// plugin's assets for the OpenShift console's backend proxy.
func TestOperator_ServesTheConsoleOverHTTPS(t *testing.T) {
	testenv.Require(t)
	env, err := testenv.Start()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = env.Stop() })
	ns := env.Namespace(t)
	ctx, cancel := context.WithCancel(context.Background())
	certDir, addr := t.TempDir(), freeAddr(t)
	cmd := newRootCommand()
	var logs lockedBuffer
	cmd.SetOut(&logs)
	cmd.SetErr(&logs)
	cmd.SetArgs([]string{"operator", "--kubeconfig", env.Kubeconfig(t), "--namespace", ns, "--metrics-bind-address=0",
		"--health-probe-bind-address=0", "--console-bind-address=" + addr, "--console-cert-dir=" + certDir})
	done := make(chan error, 1)
	go func() { done <- cmd.ExecuteContext(ctx) }()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("operator: %v", err)
			}
		case <-time.After(30 * time.Second):
			t.Error("the operator did not stop within 30s of its context ending")
		}
		// A stopped operator leaves no collector behind that reads its stopped cache: the next scrape of the
		// process's registry answers at once, without LogicalVolume states.
		gathered := make(chan []string, 1)
		go func() {
			families, _ := ctrlmetrics.Registry.Gather()
			var names []string
			for _, f := range families {
				names = append(names, f.GetName())
			}
			gathered <- names
		}()
		select {
		case names := <-gathered:
			if slices.Contains(names, "lvms_logical_volumes") {
				t.Error("lvms_logical_volumes is still served after the operator stopped")
			}
		case <-time.After(3 * time.Second):
			t.Error("gathering metrics blocks after the operator stopped")
		}
		if t.Failed() {
			t.Logf("operator log:\n%s", logs.String())
		}
	})

	viewer, err := consoletest.UserToken(ctx, env.Config, env.Client, ns, "viewer", live.ViewerRules())
	if err != nil {
		t.Fatal(err)
	}
	nobody, err := consoletest.UserToken(ctx, env.Config, env.Client, ns, "nobody", nil)
	if err != nil {
		t.Fatal(err)
	}
	httpc := &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}} // checked below
	type answer struct {
		status int
		body   string
		cn     string
	}
	get := func(path, token string) (answer, error) {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "https://"+addr+path, nil)
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := httpc.Do(req)
		if err != nil {
			return answer{}, err
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return answer{resp.StatusCode, string(b), resp.TLS.PeerCertificates[0].Subject.CommonName}, nil
	}
	var a answer
	deadline := time.Now().Add(60 * time.Second)
	for a, err = get("/healthz", ""); err != nil; a, err = get("/healthz", "") {
		if time.Now().After(deadline) {
			t.Fatalf("the console never answered on %s: %v", addr, err)
		}
		time.Sleep(200 * time.Millisecond)
	}
	if want := "lvms-console." + ns + ".svc"; !strings.HasPrefix(a.cn, want) {
		t.Errorf("without a mounted certificate the console serves %q, want a self-signed one for %s", a.cn, want)
	}

	for _, tc := range []struct {
		name, path, token string
		status            int
	}{
		{"no token", "/api/v1/overview", "", http.StatusUnauthorized},
		{"no token, page", "/", "", http.StatusUnauthorized},
		{"a token the API server rejects", "/api/v1/overview", "not-a-token", http.StatusUnauthorized},
		{"a user without read access", "/api/v1/overview", nobody, http.StatusForbidden},
		{"a viewer", "/api/v1/overview", viewer, http.StatusOK},
		{"the plugin manifest, fetched by the console's backend without a user", "/plugin/plugin-manifest.json", "", http.StatusOK},
	} {
		a, err := get(tc.path, tc.token)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if a.status != tc.status {
			t.Errorf("%s: GET %s = %d, want %d: %.300s", tc.name, tc.path, a.status, tc.status, a.body)
		}
	}
	a, _ = get("/api/v1/overview", viewer)
	if !json.Valid([]byte(a.body)) {
		t.Errorf("overview for the viewer is not JSON: %.300s", a.body)
	}

	// The service CA writes the Secret, the kubelet updates the mounted files: new connections get it.
	for _, host := range []string{"issued-by-service-ca", "rotated"} {
		crt, key, err := cert.GenerateSelfSignedCertKey(host, nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		write(t, certDir, crt, key)
		httpc.CloseIdleConnections()
		if a, err := get("/healthz", ""); err != nil || !strings.HasPrefix(a.cn, host) {
			t.Errorf("after writing the %s certificate the console serves %q (%v)", host, a.cn, err)
		}
	}
}

func write(t *testing.T, dir string, crt, key []byte) {
	t.Helper()
	for name, b := range map[string][]byte{"tls.crt": crt, "tls.key": key} {
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
}

// The in-cluster console's handler in front of TokenReviews: a bogus token repeated costs one review per
// RefusedFor; random tokens from one client are reviewed up to the limit, then answered 429 with Retry-After
// and a message saying why; a token already accepted, and other clients, go on; a review the API server could
// not make is a 502, made again on the next request, never remembered as a refusal.
func TestReviewFirst_LimitsTokenReviews(t *testing.T) {
	clk := clocktesting.NewFakePassiveClock(time.Date(2032, 3, 4, 5, 6, 7, 0, time.UTC))
	var mu sync.Mutex
	calls, apiDown := map[string]int{}, false
	review := func(_ context.Context, token string) error {
		mu.Lock()
		defer mu.Unlock()
		calls[token]++
		switch {
		case apiDown:
			return fmt.Errorf("review the token: %w", apierrors.NewServiceUnavailable("etcdserver: leader changed"))
		case token != "alice":
			return errors.New("the API server does not accept it ()")
		}
		return nil
	}
	reviews := func(token string) int { mu.Lock(); defer mu.Unlock(); return calls[token] }
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	// The cluster is unreachable: a request that gets past the review fails reading it (502).
	pool := live.NewPool(ctx, &rest.Config{Host: "https://127.0.0.1:1"}, live.Options{Clock: clk, TokenReview: review}, 0)
	h := reviewFirst(pool, web.Options{RequireToken: true})
	get := func(path, client, token string) *httptest.ResponseRecorder {
		req := httptest.NewRequest(http.MethodGet, path, nil)
		req.RemoteAddr = client + ":43210"
		req.Header.Set("Authorization", "Bearer "+token)
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		return rec
	}

	for i := range 20 {
		if rec := get("/api/v1/overview", "10.0.0.5", "bogus"); rec.Code != http.StatusUnauthorized {
			t.Fatalf("bogus token, request %d: %d %s, want 401", i+1, rec.Code, rec.Body)
		}
	}
	if n := reviews("bogus"); n != 1 {
		t.Errorf("20 requests with one bogus token: %d TokenReviews, want 1", n)
	}
	clk.SetTime(clk.Now().Add(16 * time.Second)) // past the default 15s
	if rec := get("/api/v1/overview", "10.0.0.5", "bogus"); rec.Code != http.StatusUnauthorized || reviews("bogus") != 2 {
		t.Errorf("16 s later: %d, %d TokenReviews; want 401 from a second review", rec.Code, reviews("bogus"))
	}

	if rec := get("/api/v1/overview", "10.0.0.9", "alice"); rec.Code != http.StatusBadGateway {
		t.Fatalf("alice: %d %s, want past the review to the unreachable cluster (502)", rec.Code, rec.Body)
	}
	var limited *httptest.ResponseRecorder
	reviewed := 0
	for i := range 100 {
		tok := fmt.Sprintf("random-%d", i)
		rec := get("/api/v1/overview", "10.0.0.9", tok)
		if rec.Code == http.StatusTooManyRequests {
			limited = rec
			break
		}
		if rec.Code != http.StatusUnauthorized || reviews(tok) != 1 {
			t.Fatalf("random token %d: %d after %d reviews, want 401 from one review", i, rec.Code, reviews(tok))
		}
		reviewed++
	}
	if limited == nil || reviewed != 9 {
		t.Fatalf("random tokens from one client: %d reviewed before a 429 (got one: %v), want the burst of 10 less alice's", reviewed, limited != nil)
	}
	var body struct {
		Error struct {
			Status  int    `json:"status"`
			Code    string `json:"code"`
			Message string `json:"message"`
		} `json:"error"`
	}
	if err := json.Unmarshal(limited.Body.Bytes(), &body); err != nil || body.Error.Code != "TooManyRequests" ||
		!strings.Contains(body.Error.Message, "retry in 1 s") || limited.Header().Get("Retry-After") != "1" {
		t.Errorf("429 on the API: Retry-After %q, body %s (%v); want 1 and a JSON error saying when to retry", limited.Header().Get("Retry-After"), limited.Body, err)
	}
	if n := reviews("random-9"); n != 0 {
		t.Errorf("the token answered 429 was reviewed %d times", n)
	}
	if rec := get("/", "10.0.0.9", "random-x"); rec.Code != http.StatusTooManyRequests || !strings.Contains(rec.Body.String(), "Too many requests with bearer tokens") {
		t.Errorf("a page over the limit: %d %q, want 429 saying why", rec.Code, rec.Body)
	}
	for range 5 {
		if rec := get("/api/v1/overview", "10.0.0.9", "alice"); rec.Code != http.StatusBadGateway || reviews("alice") != 1 {
			t.Errorf("alice, accepted, from the limited client: %d after %d reviews, want served as before (502 here) without a review", rec.Code, reviews("alice"))
		}
	}
	if rec := get("/api/v1/overview", "10.0.0.10", "random-y"); rec.Code != http.StatusUnauthorized {
		t.Errorf("a new token from another client: %d, want reviewed (401)", rec.Code)
	}
	clk.SetTime(clk.Now().Add(500 * time.Millisecond))
	if rec := get("/api/v1/overview", "10.0.0.9", "random-z"); rec.Code != http.StatusUnauthorized {
		t.Errorf("500 ms later: %d, want one more new token reviewed (401)", rec.Code)
	}

	mu.Lock()
	apiDown = true
	mu.Unlock()
	for i := range 2 {
		if rec := get("/api/v1/overview", "10.0.0.7", "mallory"); rec.Code != http.StatusBadGateway || reviews("mallory") != i+1 {
			t.Errorf("API server down, request %d: %d after %d reviews; want 502, reviewed once per request", i+1, rec.Code, reviews("mallory"))
		}
	}
	mu.Lock()
	apiDown = false
	mu.Unlock()
	if rec := get("/api/v1/overview", "10.0.0.7", "mallory"); rec.Code != http.StatusUnauthorized || reviews("mallory") != 3 {
		t.Errorf("API server back: %d after %d reviews; want 401 from a new review, the failures not remembered", rec.Code, reviews("mallory"))
	}
}
