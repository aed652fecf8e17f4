package bundleserve_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/clock"

	"github.com/lvms-dev/lvms/console/consoletest"
	"github.com/lvms-dev/lvms/diagnostics/bundle"
	"github.com/lvms-dev/lvms/diagnostics/bundleserve"
	"github.com/lvms-dev/lvms/diagnostics/collect"
	"github.com/lvms-dev/lvms/e2e/testenv"
	"github.com/lvms-dev/lvms/hostcheck"
	"github.com/lvms-dev/lvms/testtier"
)

// The control plane starts once, for the first test that needs it: the handler's own tests and the fuzz
// target run without one.
var (
	envOnce sync.Once
	env     *testenv.Env
	envErr  error
)

func TestMain(m *testing.M) {
	code := m.Run()
	if env != nil {
		if err := env.Stop(); err != nil {
			fmt.Fprintln(os.Stderr, "testenv: stop:", err)
		}
	}
	os.Exit(code)
}

func liveCluster(t *testing.T) *testenv.Env {
	t.Helper()
	testenv.Require(t)
	envOnce.Do(func() { env, envErr = testenv.Start() })
	if envErr != nil {
		t.Fatal(envErr)
	}
	return env
}

// preparedNS holds the prepared state's namespaced objects.
const preparedNS = "lvms-serve"

// kubectlTimeout bounds one kubectl command.
const kubectlTimeout = time.Minute

// kubectlBinary is the kubectl e2e/tools/build.sh builds beside the envtest API server (envtest's layout:
// KUBEBUILDER_ASSETS holds kubectl). Under CI a missing kubectl fails the test; elsewhere it skips.
func kubectlBinary(t *testing.T) string {
	t.Helper()
	testenv.Require(t)
	dir, err := testenv.Assets()
	if err == nil {
		p := filepath.Join(dir, "kubectl")
		if _, err = os.Stat(p); err == nil {
			return p
		}
	}
	testtier.Unavailable(t, "kubectl ("+err.Error()+"): build it with e2e/tools/build.sh, which puts it into the directory it prints (KUBEBUILDER_ASSETS)")
	return ""
}

// kubectl runs kubectl against a kubeconfig with its own discovery cache, and returns stdout and stderr.
func kubectl(t *testing.T, bin, kubeconfig string, args ...string) (string, string, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), kubectlTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, append([]string{"--kubeconfig", kubeconfig, "--cache-dir", t.TempDir()}, args...)...)
	cmd.Env = []string{"HOME=" + t.TempDir(), "PATH=/usr/bin:/bin"}
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err := cmd.Run()
	if ctx.Err() != nil {
		t.Fatalf("kubectl %s did not finish within %s", strings.Join(args, " "), kubectlTimeout)
	}
	return out.String(), errOut.String(), err
}

// podLogs stands in for the kubelets: every container's log is two lines naming it.
type podLogs struct{}

func (podLogs) Logs(_ context.Context, ns, pod string, opts *corev1.PodLogOptions) (io.ReadCloser, error) {
	return io.NopCloser(strings.NewReader(fmt.Sprintf("first line\nlast line of %s/%s %s\n", ns, pod, opts.Container))), nil
}

// age matches what differs between a live cluster asked now and a bundle collected a moment ago: ages
// (AGE, LAST SEEN, describe's event ages), which the server computes at request time and the bundle at
// collection time.
var age = regexp.MustCompile(`^(\d+[smhdy])+$|^<unknown>$|^<invalid>$`)

// notHeld is the served bundle's warning on a list of a kind the collector does not collect (kubectl
// describe node lists ResourceSlices): the live cluster has no reason to warn.
var notHeld = regexp.MustCompile(`(?m)^Warning: the support bundle does not hold .*\n`)

// normalise replaces ages by <age> and collapses the spaces that align columns (an age one character
// longer shifts the columns after it). Nothing else is changed.
func normalise(s string) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	for i, l := range lines {
		fields := strings.Fields(l)
		for j, f := range fields {
			if age.MatchString(f) {
				fields[j] = "<age>"
			}
		}
		lead := l[:len(l)-len(strings.TrimLeft(l, " "))]
		lines[i] = lead + strings.Join(fields, " ")
	}
	return strings.Join(lines, "\n")
}

// TestServe_KubectlAsLive collects a bundle from a prepared cluster with the real collector, serves it, and
// runs the same kubectl commands against the cluster and the bundle: the outputs are the same (ages aside).
func TestServe_KubectlAsLive(t *testing.T) {
	bin := kubectlBinary(t)
	env := liveCluster(t)
	ctx := context.Background()
	clk := clock.RealClock{} // the API server stamps creation times with the real clock: the state is relative to it
	if err := env.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: preparedNS}}); err != nil {
		t.Fatal(err)
	}
	if err := consoletest.Apply(ctx, env.Client, consoletest.PreparedAt(preparedNS, clk.Now())); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "bundle.tar.gz")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := collect.WriteTarGz(ctx, collect.Options{Config: env.Config, Cluster: "envtest", Version: "v-test", Logs: podLogs{},
		NoAgentViews: true, Clock: clk}, f); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	b, err := bundle.Load(path, bundle.Limits{})
	if err != nil {
		t.Fatal(err)
	}
	// Served as `lvms bundle serve` serves it, answering only requests addressed to its listener.
	hs := httptest.NewUnstartedServer(nil)
	hs.Config.Handler = bundleserve.New(b).AddressedTo(hostcheck.Listening(hs.Listener.Addr().String(), hs.Listener.Addr()))
	hs.Start()
	t.Cleanup(hs.Close)
	kc, err := bundleserve.Kubeconfig(hs.URL, "lvms-bundle")
	if err != nil {
		t.Fatal(err)
	}
	served := filepath.Join(t.TempDir(), "served.kubeconfig")
	if err := os.WriteFile(served, kc, 0o600); err != nil {
		t.Fatal(err)
	}
	live := env.Kubeconfig(t)

	ns := "-n=" + preparedNS
	for _, args := range [][]string{
		{"get", "lvmnodesets", ns},
		{"get", "lvmnodes", "-A"},
		{"get", "lvmnode", consoletest.NodeB, ns, "-o", "yaml"},
		{"get", "lvmclusters", "-A", "-o", "wide"},
		{"get", "logicalvolumes"},
		{"get", "nodes", "--show-labels"},
		{"get", "nodes", "-l", "kubernetes.io/hostname=" + consoletest.NodeA, "-o", "name"},
		{"get", "nodes", "-L", "kubernetes.io/hostname"},
		{"get", "node", consoletest.NodeC, "-o", "json"},
		{"get", "pv,pvc,sc", "-A"},
		{"get", "pvc", "data-db-0", ns, "-o", "yaml"},
		{"get", "events", ns},
		{"get", "lvmvolumegroupnodestatuses", ns, "-o", "name"},
		{"get", "lvmnodes", ns, "--field-selector", "metadata.name=" + consoletest.NodeA},
		{"describe", "lvmnode", consoletest.NodeB, ns},
		{"describe", "lvmcluster", ns},
		{"describe", "node", consoletest.NodeA},
		{"describe", "pvc", "data-db-0", ns},
		{"api-resources"},
		{"get", "lvmnode", "nothere", ns},
		{"get", "lvmnodes", ns, "-l", "no-such-label=1"},
	} {
		t.Run(strings.Join(args, " "), func(t *testing.T) {
			wantOut, wantErr, wantRunErr := kubectl(t, bin, live, args...)
			gotOut, gotErr, gotRunErr := kubectl(t, bin, served, args...)
			if strings.TrimSpace(wantOut+wantErr) == "" {
				t.Fatal("the live cluster printed nothing: the comparison would prove nothing")
			}
			if (wantRunErr == nil) != (gotRunErr == nil) {
				t.Errorf("live: %v, served: %v (stderr %q)", wantRunErr, gotRunErr, gotErr)
			}
			if normalise(gotOut) != normalise(wantOut) {
				t.Errorf("served bundle:\n%s\nlive cluster:\n%s", gotOut, wantOut)
			}
			if normalise(notHeld.ReplaceAllString(gotErr, "")) != normalise(wantErr) {
				t.Errorf("served bundle's stderr:\n%s\nlive cluster's:\n%s", gotErr, wantErr)
			}
		})
	}

	t.Run("writes are refused with 405", func(t *testing.T) {
		manifest := filepath.Join(t.TempDir(), "cm.yaml")
		if err := os.WriteFile(manifest, []byte("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: new\n  namespace: "+preparedNS+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		for _, tc := range []struct {
			args []string
			want string
		}{
			{[]string{"delete", "lvmnode", consoletest.NodeA, ns}, "read-only"},
			{[]string{"label", "node", consoletest.NodeA, "x=y"}, "read-only"},
			{[]string{"create", "configmap", "x", ns}, "read-only"},
			{[]string{"apply", "--validate=false", "-f", manifest}, "read-only"},
			// kubectl apply asks for the OpenAPI schema before it writes and prints its own message for the
			// 405 it gets, without the server's.
			{[]string{"apply", "-f", manifest}, "the server does not allow this method"},
		} {
			_, stderr, err := kubectl(t, bin, served, tc.args...)
			var ee *exec.ExitError
			if !errors.As(err, &ee) || !strings.Contains(stderr, tc.want) {
				t.Errorf("kubectl %s: %v, stderr %q; want it refused, saying %q", strings.Join(tc.args, " "), err, stderr, tc.want)
			}
		}
	})

	// The live cluster has no kubelet to ask for logs: the bundle's are what the collector was given.
	t.Run("logs", func(t *testing.T) {
		out, stderr, err := kubectl(t, bin, served, "logs", "db-0", ns, "--tail", "1")
		if err != nil || out != "last line of "+preparedNS+"/db-0 db\n" {
			t.Errorf("kubectl logs = %q, %v (stderr %q); want the collected log's last line", out, err, stderr)
		}
	})

	t.Run("a watch ends at once", func(t *testing.T) {
		out, stderr, _ := kubectl(t, bin, served, "get", "lvmnodes", ns, "-w")
		if !strings.Contains(out, consoletest.NodeA) {
			t.Errorf("kubectl get -w printed %q (stderr %q); want the bundle's LVMNodes", out, stderr)
		}
	})
}
