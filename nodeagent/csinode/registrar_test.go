package csinode_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	registerapi "k8s.io/kubelet/pkg/apis/pluginregistration/v1"

	"github.com/lvms-dev/lvms/nodeagent/csinode"
)

// TestRegistrar plays kubelet's plugin watcher: it dials <driver>-reg.sock in the registry directory,
// asks GetInfo, reports the registration, and then reaches the CSI socket the registrar named.
func TestRegistrar(t *testing.T) {
	dir := t.TempDir()
	csiSocket := filepath.Join(dir, "plugins", "topolvm.io", "node", "csi-topolvm.sock")
	ctx, cancel := context.WithCancel(context.Background())
	errs := make(chan error, 2)
	t.Cleanup(func() {
		cancel()
		for range 2 {
			if err := <-errs; err != nil {
				t.Error(err)
			}
		}
	})
	go func() {
		errs <- csinode.ServeUnix(ctx, csiSocket, csinode.Services{Identity: csinode.NewIdentity("topolvm.io", "v1", nil)})
	}()
	reg := csinode.NewRegistrar("topolvm.io", csiSocket)
	registry := filepath.Join(dir, "plugins_registry")
	go func() { errs <- reg.Serve(ctx, registry) }()

	conn := dialWhenReady(t, filepath.Join(registry, "topolvm.io-reg.sock"))
	rc := registerapi.NewRegistrationClient(conn)
	info, err := rc.GetInfo(ctx, &registerapi.InfoRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if info.Type != registerapi.CSIPlugin || info.Name != "topolvm.io" || info.Endpoint != csiSocket || info.SupportedVersions[0] != "1.0.0" {
		t.Fatalf("plugin info %v", info)
	}
	if _, err := rc.NotifyRegistrationStatus(ctx, &registerapi.RegistrationStatus{PluginRegistered: true}); err != nil {
		t.Fatal(err)
	}
	if s := <-reg.Status(); !s.PluginRegistered {
		t.Errorf("status %v", s)
	}
	plugin, err := csi.NewIdentityClient(dialWhenReady(t, info.Endpoint)).GetPluginInfo(ctx, &csi.GetPluginInfoRequest{})
	if err != nil || plugin.Name != "topolvm.io" {
		t.Fatalf("the registered endpoint answers %v, %v", plugin, err)
	}
}

// dialWhenReady waits for a socket file to appear and connects to it.
func dialWhenReady(t *testing.T, socket string) *grpc.ClientConn {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		if _, err := os.Stat(socket); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s did not appear", socket)
		}
		time.Sleep(10 * time.Millisecond)
	}
	conn, err := grpc.NewClient("unix://"+socket, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	return conn
}
