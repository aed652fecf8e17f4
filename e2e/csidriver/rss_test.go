package csidriver_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/lvms-dev/lvms/benchsmoke"
	"github.com/lvms-dev/lvms/e2e/testenv"
)

// BenchmarkNodeAgentRSS builds lvms, runs `lvms nodeagent` (with lvmd, the LogicalVolume reconciler and
// the CSI node service on its socket) against the envtest API server, checks that the CSI socket answers,
// and reports the process's resident memory after it settled. LVM is scoped to an empty LVM_SYSTEM_DIR,
// so the agent sees no devices: this is the idle footprint of the binary with the CSI services up. Under
// make test's smoke (benchsmoke) it measures as soon as the socket answers.
func BenchmarkNodeAgentRSS(b *testing.B) {
	testenv.Require(b)
	dir := b.TempDir()
	bin := testenv.BuildLVMS(b)
	kubeconfig := env.Kubeconfig(b)
	ctx := context.Background()
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "rss-node"}}
	if err := env.Client.Create(ctx, node); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = env.Client.Delete(ctx, node) })
	ns := env.Namespace(b)
	socket := filepath.Join(dir, "csi.sock")
	for range b.N {
		cmd := exec.Command(bin, "nodeagent", "--kubeconfig", kubeconfig, "--node-name", node.Name, "--namespace", ns,
			"--lvmd-config", filepath.Join(dir, "lvmd.yaml"), "--host-nsenter", "false", "--lvm-system-dir", filepath.Join(dir, "lvm"),
			"--lvm-devices-file", "rss", "--csi-socket", socket, "--shared-csi-socket", filepath.Join(dir, "shared.sock"), "--kubelet-registration-dir", filepath.Join(dir, "registry"),
			"--metrics-bind-address", "0", "--health-probe-bind-address", "0")
		log, err := os.Create(filepath.Join(dir, "nodeagent.log"))
		if err != nil {
			b.Fatal(err)
		}
		cmd.Stdout, cmd.Stderr = log, log
		if err := cmd.Start(); err != nil {
			b.Fatal(err)
		}
		stop := func() { _ = cmd.Process.Kill(); _ = cmd.Wait(); _ = log.Close() }
		if err := waitCSI(socket, node.Name); err != nil {
			stop()
			out, _ := os.ReadFile(log.Name())
			b.Fatalf("CSI node socket: %v\nagent log:\n%s", err, out)
		}
		time.Sleep(benchsmoke.Idle(10 * time.Second)) // let caches fill and the first reconciles settle
		rss, err := testenv.RSSKiB(cmd.Process.Pid)
		stop()
		if err != nil {
			b.Fatal(err)
		}
		b.ReportMetric(float64(rss)/1024, "MiB-RSS")
		fmt.Printf("lvms nodeagent RSS with the CSI node service running: %.1f MiB\n", float64(rss)/1024)
	}
}

func waitCSI(socket, nodeName string) error {
	deadline := time.Now().Add(time.Minute)
	var last error
	for time.Now().Before(deadline) {
		conn, err := grpc.NewClient("unix://"+socket, grpc.WithTransportCredentials(insecure.NewCredentials()))
		if err == nil {
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			info, err2 := csi.NewNodeClient(conn).NodeGetInfo(ctx, &csi.NodeGetInfoRequest{})
			cancel()
			_ = conn.Close()
			if err2 == nil && info.NodeId == nodeName {
				return nil
			}
			err = err2
		}
		last = err
		time.Sleep(200 * time.Millisecond)
	}
	return fmt.Errorf("no answer after a minute: %v", last)
}
