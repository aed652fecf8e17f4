package collect_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/lvms-dev/lvms/console/consoletest"
	"github.com/lvms-dev/lvms/diagnostics/collect"
	"github.com/lvms-dev/lvms/e2e/testenv"
)

// largeNodes is the size of the benchmark cluster.
const largeNodes = 1000

var (
	largeOnce sync.Once
	largeErr  error
)

// prepareLarge writes consoletest.Large (nodes x 16 devices, 2 volumes each) into the control plane once,
// and starts a real diagnostics endpoint and agent pod per node for this benchmark run.
func prepareLarge(b *testing.B) {
	b.Helper()
	ctx := context.Background()
	largeOnce.Do(func() {
		if largeErr = env.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "lvms"}}); largeErr != nil {
			return
		}
		if largeErr = consoletest.Apply(ctx, env.Client, consoletest.Large(largeNodes, 16)); largeErr != nil {
			return
		}
		largeErr = makeGatherer(ctx, "lvms", "bench-gatherer")
	})
	if largeErr != nil {
		b.Fatal(largeErr)
	}
	cs := kubernetes.NewForConfigOrDie(env.Config)
	ip := hostIP(b)
	for i := range largeNodes {
		startAgent(b, ctx, cs, ip, "lvms", consoletest.LargeNodeName(i))
	}
}

// BenchmarkBundle collects a bundle of a 1,000-node cluster through the API server, every node agent's
// view fetched through pods/proxy from a real endpoint, and reports the time, the bundle's size and the
// process's peak RSS while collecting (the peak is reset first; the process also serves the 1,000
// agents' endpoints, so it bounds the collector's from above):
//
//	go test -run '^$' -bench Bundle -benchtime 1x ./diagnostics/collect/
func BenchmarkBundle(b *testing.B) {
	b.Run(fmt.Sprintf("nodes=%d", largeNodes), benchBundle)
}

func benchBundle(b *testing.B) {
	prepareLarge(b)
	ctx := context.Background()
	sa := "lvms/bench-gatherer"
	dir := b.TempDir()
	var size, collected int64
	var files int
	var peakKiB int64
	var elapsed time.Duration
	for i := 0; b.Loop(); i++ {
		path := filepath.Join(dir, fmt.Sprintf("b%d.tar.gz", i))
		f, err := os.Create(path)
		if err != nil {
			b.Fatal(err)
		}
		runtime.GC()
		if err := testenv.ResetPeakRSS(); err != nil {
			b.Fatal(err)
		}
		start := time.Now()
		sum, err := collect.WriteTarGz(ctx, collect.Options{Config: env.Config, Namespaces: []string{"lvms"}, AgentServiceAccount: sa, Logs: fakeLogs{}}, f)
		if err != nil {
			b.Fatal(err)
		}
		elapsed += time.Since(start)
		peak, err := testenv.PeakRSSKiB(0)
		if err != nil {
			b.Fatal(err)
		}
		peakKiB = max(peakKiB, peak)
		_ = f.Close()
		for _, c := range sum.Manifest.Collectors {
			if c.Error != "" {
				b.Fatalf("collector %s failed: %s", c.Name, c.Error)
			}
			files += c.Files
		}
		st, _ := os.Stat(path)
		size, collected = st.Size(), sum.Bytes
	}
	elapsed /= time.Duration(b.N)
	b.ReportMetric(elapsed.Seconds(), "s-collect")
	b.ReportMetric(float64(size)/1e6, "MB-bundle")
	b.ReportMetric(float64(collected)/1e6, "MB-collected")
	b.ReportMetric(float64(peakKiB)/1024, "peak-RSS-MiB")
	b.ReportMetric(float64(files/b.N), "files")
	b.Logf("%d nodes: bundle in %s, %d bytes compressed (%d collected, %d files), peak RSS %d MiB", largeNodes, elapsed.Round(time.Millisecond), size, collected, files/b.N, peakKiB/1024)
}
