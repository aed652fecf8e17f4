package main

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"k8s.io/client-go/util/cert"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	"github.com/lvms-dev/lvms/console/consoletest"
	"github.com/lvms-dev/lvms/console/live"
	"github.com/lvms-dev/lvms/e2e/testenv"
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
