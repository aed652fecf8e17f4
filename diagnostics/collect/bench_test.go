package collect_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/lvms-dev/lvms/benchsmoke"
	"github.com/lvms-dev/lvms/console/consoletest"
	"github.com/lvms-dev/lvms/e2e/testenv"
)

// largeNodes is the size of the benchmark cluster (under make test's smoke, benchsmoke, 5 nodes).
var largeNodes = benchsmoke.Size(1000, 5)

// prepareLarge starts a control plane for the benchmark alone (the bundle holds the whole cluster, and
// consoletest's cluster-scoped names are the tests' too, which make test's smoke runs it after), writes
// consoletest.Large (nodes x 16 devices, 2 volumes each) into it, and starts a real diagnostics endpoint
// and agent pod per node.
func prepareLarge(b *testing.B) *testenv.Env {
	b.Helper()
	testenv.Require(b)
	ctx := context.Background()
	own, err := testenv.Start()
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		if err := own.Stop(); err != nil {
			b.Errorf("stop the benchmark's control plane: %v", err)
		}
	})
	if err := own.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "lvms"}}); err != nil {
		b.Fatal(err)
	}
	if err := consoletest.Apply(ctx, own.Client, consoletest.Large(largeNodes, 16)); err != nil {
		b.Fatal(err)
	}
	if err := makeGatherer(ctx, own, "lvms", "bench-gatherer"); err != nil {
		b.Fatal(err)
	}
	cs := kubernetes.NewForConfigOrDie(own.Config)
	ip := hostIP(b)
	for i := range largeNodes {
		startAgent(b, ctx, cs, ip, "lvms", consoletest.LargeNodeName(i))
	}
	return own
}

// BenchmarkBundle runs `lvms bundle` as its own process against a 1,000-node cluster, every node agent's
// view fetched through pods/proxy from a real endpoint (served by this benchmark), and reports the time,
// the bundle's size and the peak RSS of the lvms process (the kernel's maxrss of the child). Pod logs are
// left out (--no-logs): there is no kubelet to serve them here.
//
//	go test -run '^$' -bench Bundle -benchtime 1x ./diagnostics/collect/
func BenchmarkBundle(b *testing.B) {
	b.Run(fmt.Sprintf("nodes=%d", largeNodes), benchBundle)
}

func benchBundle(b *testing.B) {
	testenv.Require(b)
	own := prepareLarge(b)
	bin := testenv.BuildLVMS(b)
	kubeconfig := own.Kubeconfig(b)
	dir := b.TempDir()
	var size int64
	var peakKiB int64
	var elapsed time.Duration
	for i := 0; b.Loop(); i++ {
		path := filepath.Join(dir, fmt.Sprintf("b%d.tar.gz", i))
		cmd := exec.Command(bin, "bundle", "--kubeconfig", kubeconfig, "-n", "lvms", "--agent-service-account", "lvms/bench-gatherer",
			"--no-logs", "--output-file", path)
		start := time.Now()
		out, err := cmd.CombinedOutput()
		elapsed += time.Since(start)
		if err != nil {
			b.Fatalf("lvms bundle: %v\n%s", err, out)
		}
		if ru, ok := cmd.ProcessState.SysUsage().(*syscall.Rusage); ok {
			peakKiB = max(peakKiB, ru.Maxrss) // KiB on Linux
		}
		st, err := os.Stat(path)
		if err != nil {
			b.Fatal(err)
		}
		size = st.Size()
	}
	elapsed /= time.Duration(b.N)
	b.ReportMetric(elapsed.Seconds(), "s-collect")
	b.ReportMetric(float64(size)/1e6, "MB-bundle")
	b.ReportMetric(float64(peakKiB)/1024, "peak-RSS-MiB")
	b.Logf("%d nodes: bundle in %s, %d bytes compressed, peak RSS %d MiB", largeNodes, elapsed.Round(time.Millisecond), size, peakKiB/1024)
}
