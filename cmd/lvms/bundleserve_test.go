package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/lvms-dev/lvms/diagnostics/bundletest"
)

// TestBundleServe_ServesUntilInterrupted: `lvms bundle serve` writes a kubeconfig whose server answers from
// the bundle, refuses writes, and stops when its context ends.
func TestBundleServe_ServesUntilInterrupted(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "b.tar.gz")
	bundletest.Healthy().WriteTarGz(t, path)
	kcPath := filepath.Join(dir, "kubeconfig")

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var out bytes.Buffer
	server, done := startServe(t, ctx, &out, path, "--kubeconfig-out", kcPath)
	if !strings.HasPrefix(server, "http://127.0.0.1:") {
		t.Fatalf("kubeconfig server %q; want one on loopback", server)
	}
	resp, err := http.Get(server + "/api/v1/nodes")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), bundletest.NodeA) {
		t.Errorf("GET /api/v1/nodes = %d %s; want the bundle's nodes", resp.StatusCode, body)
	}
	req, _ := http.NewRequest(http.MethodDelete, server+"/api/v1/nodes/"+bundletest.NodeA, nil)
	if resp, err := http.DefaultClient.Do(req); err != nil || resp.StatusCode != http.StatusMethodNotAllowed {
		t.Errorf("DELETE = %v %v; want 405", resp, err)
	} else {
		_ = resp.Body.Close()
	}
	cancel()
	if err := <-done; err != nil {
		t.Errorf("lvms bundle serve after interrupt: %v", err)
	}
	if out.Len() != 0 {
		t.Errorf("with --kubeconfig-out, standard output has %q", out.String())
	}
}

// startServe runs `lvms bundle serve BUNDLE --kubeconfig-out FILE args...` until ctx ends and returns the
// server address its kubeconfig names, and the command's result.
func startServe(t *testing.T, ctx context.Context, out io.Writer, bundlePath string, args ...string) (string, <-chan error) {
	t.Helper()
	kcPath := filepath.Join(t.TempDir(), "kubeconfig")
	if i := slices.Index(args, "--kubeconfig-out"); i >= 0 && i+1 < len(args) {
		kcPath = args[i+1]
	} else {
		args = append(args, "--kubeconfig-out", kcPath)
	}
	cmd := newRootCommand()
	cmd.SetOut(out)
	cmd.SetErr(io.Discard)
	cmd.SetArgs(append([]string{"bundle", "serve", bundlePath}, args...))
	done := make(chan error, 1)
	go func() { done <- cmd.ExecuteContext(ctx) }()
	// The kubeconfig appears once the server listens (bounded wait: the command may also fail at once).
	for range 200 {
		select {
		case err := <-done:
			t.Fatalf("lvms bundle serve ended: %v", err)
		case <-time.After(25 * time.Millisecond):
		}
		if cfg, err := clientcmd.LoadFromFile(kcPath); err == nil {
			return cfg.Clusters[cfg.Contexts[cfg.CurrentContext].Cluster].Server, done
		}
	}
	t.Fatalf("lvms bundle serve wrote no kubeconfig to %s", kcPath)
	return "", nil
}

// TestBundleServe_RefusesOtherHosts: the served bundle has no authentication, so a web page that points its
// own name at the server's address (DNS rebinding) must get nothing; kubectl, and a person typing the
// address or localhost with the server's port, get the bundle.
func TestBundleServe_RefusesOtherHosts(t *testing.T) {
	path := filepath.Join(t.TempDir(), "b.tar.gz")
	bundletest.Healthy().WriteTarGz(t, path)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	server, done := startServe(t, ctx, io.Discard, path)
	u, err := url.Parse(server)
	if err != nil {
		t.Fatal(err)
	}
	port := u.Port()
	otherPort := "1"
	if port == otherPort {
		otherPort = "2"
	}
	for _, tc := range []struct {
		host    string
		refused bool
	}{
		{u.Host, false}, // what kubectl sends, from the kubeconfig
		{"localhost:" + port, false},
		{"LocalHost:" + port, false},
		{"[::1]:" + port, false},
		{"evil.example:" + port, true},
		{"127.0.0.1.nip.io:" + port, true},
		{"localhost.evil.example:" + port, true},
		{"127.0.0.1:" + otherPort, true},
		{"localhost:" + otherPort, true},
		{"localhost", true}, // port 80, not the server's
		{"10.0.0.5:" + port, true},
	} {
		req, err := http.NewRequest(http.MethodGet, server+"/api/v1/nodes", nil)
		if err != nil {
			t.Fatal(err)
		}
		req.Host = tc.host
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatalf("Host %q: %v", tc.host, err)
		}
		body, _ := io.ReadAll(resp.Body)
		_ = resp.Body.Close()
		if !tc.refused {
			if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), bundletest.NodeA) {
				t.Errorf("Host %q: %d %s; want the bundle's nodes", tc.host, resp.StatusCode, body)
			}
			continue
		}
		var st metav1.Status
		if err := json.Unmarshal(body, &st); err != nil || resp.StatusCode != http.StatusForbidden || st.Kind != "Status" ||
			st.Reason != metav1.StatusReasonForbidden || st.Code != http.StatusForbidden {
			t.Errorf("Host %q: %d %s; want a 403 Forbidden Status", tc.host, resp.StatusCode, body)
			continue
		}
		if !strings.Contains(st.Message, strconv.Quote(tc.host)) || !strings.Contains(st.Message, u.Host) || !strings.Contains(st.Message, "DNS rebinding") {
			t.Errorf("Host %q refused with %q; want the message to name that Host, the address served (%s) and why (DNS rebinding)", tc.host, st.Message, u.Host)
		}
		if strings.Contains(string(body), bundletest.NodeA) {
			t.Errorf("Host %q: the refusal shows bundle data: %s", tc.host, body)
		}
	}
	cancel()
	if err := <-done; err != nil {
		t.Errorf("lvms bundle serve after interrupt: %v", err)
	}
}

func TestBundleServe_PrintsTheKubeconfig(t *testing.T) {
	path := filepath.Join(t.TempDir(), "b.tar.gz")
	bundletest.Healthy().WriteTarGz(t, path)
	ctx, cancel := context.WithCancel(context.Background())
	cancel() // prints the kubeconfig, then stops at once
	cmd := newRootCommand()
	var out, errOut bytes.Buffer
	cmd.SetOut(&out)
	cmd.SetErr(&errOut)
	cmd.SetArgs([]string{"bundle", "serve", path})
	if err := cmd.ExecuteContext(ctx); err != nil {
		t.Fatal(err)
	}
	cfg, err := clientcmd.Load(out.Bytes())
	if err != nil || cfg.CurrentContext != "lvms-bundle" {
		t.Fatalf("standard output is not the kubeconfig (%v):\n%s", err, out.String())
	}
	if !strings.Contains(errOut.String(), "kubectl get lvmclusters -A") {
		t.Errorf("no hint on standard error:\n%s", errOut.String())
	}
}

func TestBundleServe_NeverOverwritesAKubeconfig(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "b.tar.gz")
	bundletest.Healthy().WriteTarGz(t, path)
	existing := filepath.Join(dir, "config")
	if err := os.WriteFile(existing, []byte("mine"), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err := run(t, "bundle", "serve", path, "--kubeconfig-out", existing)
	if err == nil || !strings.Contains(err.Error(), "--kubeconfig-out") || !strings.Contains(err.Error(), "never overwritten") {
		t.Errorf("err = %v; want one naming --kubeconfig-out and saying it is never overwritten", err)
	}
	if data, _ := os.ReadFile(existing); string(data) != "mine" {
		t.Errorf("the existing file now holds %q", data)
	}
}

// A bundle served on a busy address says so once (issue 41 point 8: "listen" said twice), naming the
// address and the flag.
func TestBundleServe_BusyAddressNamedOnce(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	addr := l.Addr().String()
	path := filepath.Join(t.TempDir(), "b.tar.gz")
	bundletest.Healthy().WriteTarGz(t, path)
	_, err = run(t, "bundle", "serve", path, "--listen", addr)
	if err == nil || strings.Count(err.Error(), addr) != 1 || strings.Count(err.Error(), "listen") != 2 || // "listen tcp" and "--listen"
		!strings.Contains(err.Error(), "address already in use") || !strings.Contains(err.Error(), "pass --listen with another") {
		t.Fatalf("lvms bundle serve on a busy %s: %v, want the address named once and --listen offered", addr, err)
	}
}
