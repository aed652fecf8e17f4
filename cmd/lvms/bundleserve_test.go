package main

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

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
	cmd := newRootCommand()
	var out bytes.Buffer
	cmd.SetOut(&out)
	cmd.SetErr(io.Discard)
	cmd.SetArgs([]string{"bundle", "serve", path, "--kubeconfig-out", kcPath})
	done := make(chan error, 1)
	go func() { done <- cmd.ExecuteContext(ctx) }()

	var server string
	// The kubeconfig appears once the server listens (bounded wait: the command may also fail at once).
	for i := 0; i < 200 && server == ""; i++ {
		select {
		case err := <-done:
			t.Fatalf("lvms bundle serve ended: %v", err)
		case <-time.After(25 * time.Millisecond):
		}
		if cfg, err := clientcmd.LoadFromFile(kcPath); err == nil {
			server = cfg.Clusters[cfg.Contexts[cfg.CurrentContext].Cluster].Server
		}
	}
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
