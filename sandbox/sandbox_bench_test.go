package sandbox

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/lvms-dev/lvms/e2e/testenv"
	"github.com/lvms-dev/lvms/nodeagent/loopdev"
	"github.com/lvms-dev/lvms/operator"
)

// BenchmarkSandbox measures the simulated sandbox as `make run` starts it (its programs already built: the
// warm case): Run called → the sandbox up and every sample settled (s-to-ready); the walkthrough's claim
// applied → Bound (s-claim-bound); Ctrl-C → everything stopped and removed (s-to-stop). Each iteration is
// a whole sandbox.
func BenchmarkSandbox(b *testing.B) {
	loopdev.RequireRoot(b)
	bin := testenv.BuildLVMS(b)
	var ready, bound, stop time.Duration
	for range b.N {
		state := b.TempDir()
		ctx, cancel := context.WithCancel(context.Background())
		up := make(chan string, 1)
		done := make(chan error, 1)
		start := time.Now()
		go func() {
			done <- Run(ctx, Options{StateDir: state, Namespace: "openshift-storage", RepoRoot: testenv.RepoRoot(), Binary: bin,
				ConsoleAddr: "127.0.0.1:0", Out: &syncBuffer{}, Ready: func(kc string) { up <- kc }})
		}()
		var kubeconfig string
		select {
		case kubeconfig = <-up:
		case err := <-done:
			b.Fatalf("the sandbox stopped before it was up: %v", err)
		}
		cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
		if err != nil {
			b.Fatal(err)
		}
		c, err := client.New(cfg, client.Options{Scheme: operator.NewScheme()})
		if err != nil {
			b.Fatal(err)
		}
		settle, cancelSettle := context.WithTimeout(ctx, 2*time.Minute)
		err = WaitSettled(settle, c, "openshift-storage")
		cancelSettle()
		if err != nil {
			b.Fatalf("samples not settled: %v", err)
		}
		ready += time.Since(start)

		objs, err := DecodeFile(testenv.RepoRoot() + "/sandbox/testdata/claim.yaml")
		if err != nil {
			b.Fatal(err)
		}
		applied := time.Now()
		for _, o := range objs {
			if err := c.Create(ctx, o); err != nil {
				b.Fatal(err)
			}
		}
		pvc := &corev1.PersistentVolumeClaim{}
		if err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
			err := c.Get(ctx, client.ObjectKey{Namespace: "default", Name: "data"}, pvc)
			return err == nil && pvc.Status.Phase == corev1.ClaimBound, nil
		}); err != nil {
			b.Fatalf("the claim is not Bound: %v", err)
		}
		bound += time.Since(applied)

		stopped := time.Now()
		cancel()
		if err := <-done; err != nil {
			b.Fatalf("sandbox: %v", err)
		}
		stop += time.Since(stopped)
		if loops, err := loopsUnder(context.Background(), state+"/disks"); err != nil || len(loops) > 0 {
			b.Fatalf("loop devices left: %v (%v)", loops, err)
		}
	}
	n := float64(b.N)
	b.ReportMetric(ready.Seconds()/n, "s-to-ready")
	b.ReportMetric(bound.Seconds()/n, "s-claim-bound")
	b.ReportMetric(stop.Seconds()/n, "s-to-stop")
}
