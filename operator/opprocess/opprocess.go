// Package opprocess runs `lvms operator` as its own process the way deploy/ runs it, for the benchmarks
// and tests that measure the operator's footprint: with the Go runtime variables (GOMEMLIMIT, GOGC) its
// Deployment sets, read from the rendered manifests (Env), so that a figure can never be measured with
// other settings than those a cluster runs. It also reads the Go runtime's own accounting of the process
// (Runtime: the GC's CPU time, the live heap, the memory limit) from the operator's metrics endpoint.
package opprocess

import (
	"context"
	"crypto/tls"
	"fmt"
	"net/http"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	authnv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/kubernetes"

	"github.com/lvms-dev/lvms/bench"
	"github.com/lvms-dev/lvms/deploy/olm"
	"github.com/lvms-dev/lvms/e2e/testenv"
)

// DefaultOverlay is the install the benchmarks measure: plain Kubernetes (the OpenShift overlay runs the
// same Deployment; MicroShift's lowers the limit and request).
const DefaultOverlay = "kubernetes"

// Env is the Go runtime variables (bench.RuntimeVariables: GOGC, GOMEMLIMIT, …) that the operator's
// container gets in deploy/overlays/<overlay>, rendered as kubectl apply -k renders it
// (deploy/operator/deployment.yaml and the overlay's patches), as NAME=value in the manifest's order.
func Env(overlay string) ([]string, error) {
	dir := filepath.Join(testenv.RepoRoot(), "deploy", "overlays", overlay)
	objs, err := olm.Render(dir)
	if err != nil {
		return nil, err
	}
	for _, o := range objs {
		if o.GetKind() != "Deployment" || o.GetName() != "lvms-operator" {
			continue
		}
		containers, _, _ := unstructured.NestedSlice(o.Object, "spec", "template", "spec", "containers")
		for _, c := range containers {
			c, _ := c.(map[string]any)
			if c["name"] != "operator" {
				continue
			}
			var out []string
			list, _ := c["env"].([]any)
			for _, e := range list {
				e, _ := e.(map[string]any)
				name, _ := e["name"].(string)
				if !slices.Contains(bench.RuntimeVariables, name) {
					continue
				}
				value, ok := e["value"].(string)
				if !ok {
					return nil, fmt.Errorf("%s: the operator's %s is not a literal string (%v)", dir, name, e)
				}
				out = append(out, name+"="+value)
			}
			return out, nil
		}
		return nil, fmt.Errorf("%s: Deployment lvms-operator has no container named operator", dir)
	}
	return nil, fmt.Errorf("%s renders no Deployment lvms-operator", dir)
}

// Options are what differs between the benchmarks' and tests' operators.
type Options struct {
	// Kubeconfig and Namespace are the operator's --kubeconfig and --namespace.
	Kubeconfig, Namespace string
	// Pprof is --pprof-bind-address (Go's profiles; "" disables them).
	Pprof string
	// Metrics serves the operator's metrics endpoint on a free local port, with a token allowed to scrape
	// it (Process.Runtime). It is the Deployment's default; without it --metrics-bind-address=0.
	Metrics *testenv.Env
	// Env overrides the manifest's variables (Env) or adds to them: a test's reduced GOMEMLIMIT.
	Env []string
}

// Process is a running `lvms operator`.
type Process struct {
	PID int
	// Env is the Go runtime variables it runs with (the manifest's, then Options.Env).
	Env []string

	metricsURL, token string
	http              *http.Client
}

// Start runs `lvms operator` (bin, from testenv.BuildLVMS) with the runtime variables of DefaultOverlay's
// Deployment and the flags the benchmarks use (every controller, the provisioner, the CSI controller; no
// console, probes or CSI socket listening; a placeholder node agent image), until tb ends. It reports the
// process with its environment and flags to make bench (bench.ReportProcess), this run's paths and addresses
// named, and fails tb when the manifests cannot be read.
func Start(tb testing.TB, bin string, o Options) *Process {
	tb.Helper()
	env, err := Env(DefaultOverlay)
	if err != nil {
		tb.Fatalf("the operator's environment from deploy/: %v", err)
	}
	for _, v := range o.Env { // an override replaces the manifest's value in place
		name, _, _ := strings.Cut(v, "=")
		if i := slices.IndexFunc(env, func(e string) bool { return strings.HasPrefix(e, name+"=") }); i >= 0 {
			env[i] = v
		} else {
			env = append(env, v)
		}
	}
	p := &Process{Env: env}
	metrics, pprof := "0", "0"
	if o.Metrics != nil {
		metrics = testenv.FreeLocalAddr(tb)
		p.metricsURL = "https://" + metrics + "/metrics"
		p.token = scrapeToken(tb, o.Metrics, o.Namespace)
		p.http = &http.Client{Timeout: 30 * time.Second,
			Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}} // its own self-signed certificate
	}
	if o.Pprof != "" {
		pprof = o.Pprof
	}
	args := []string{"operator", "--kubeconfig", "KUBECONFIG", "--namespace", "NAMESPACE", "--node-agent-image", "quay.io/lvms/lvms:bench",
		"--metrics-bind-address=" + placeholder(metrics, "METRICS"), "--console-bind-address=0", "--health-probe-bind-address=0", "--csi-socket=",
		"--pprof-bind-address=" + placeholder(pprof, "PPROF")}
	bench.ReportProcess(tb, strings.Join(env, " ")+" lvms "+strings.Join(args, " "))
	thisRun := strings.NewReplacer("KUBECONFIG", o.Kubeconfig, "NAMESPACE", o.Namespace, "METRICS", metrics, "PPROF", pprof)
	for i := range args {
		args[i] = thisRun.Replace(args[i])
	}
	p.PID = testenv.StartProcess(tb, bin, env, args...)
	return p
}

// placeholder is name for an address of this run only, "0" (off) as it is.
func placeholder(addr, name string) string {
	if addr == "0" {
		return addr
	}
	return name
}

// scrapeToken is the token of a ServiceAccount in ns allowed to get /metrics (what the Deployment's
// lvms-metrics-reader ClusterRole grants a Prometheus).
func scrapeToken(tb testing.TB, env *testenv.Env, ns string) string {
	tb.Helper()
	ctx := context.Background()
	cs, err := kubernetes.NewForConfig(env.Config)
	if err != nil {
		tb.Fatal(err)
	}
	const sa = "lvms-bench-scraper"
	if _, err := cs.CoreV1().ServiceAccounts(ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: sa}}, metav1.CreateOptions{}); err != nil {
		tb.Fatalf("the metrics scraper's ServiceAccount: %v", err)
	}
	env.Grant(tb, "lvms-bench-scraper-"+ns, rbacv1.Subject{Kind: rbacv1.ServiceAccountKind, Name: sa, Namespace: ns},
		rbacv1.PolicyRule{NonResourceURLs: []string{"/metrics"}, Verbs: []string{"get"}})
	exp := int64(24 * 3600)
	tr, err := cs.CoreV1().ServiceAccounts(ns).CreateToken(ctx, sa, &authnv1.TokenRequest{Spec: authnv1.TokenRequestSpec{ExpirationSeconds: &exp}}, metav1.CreateOptions{})
	if err != nil {
		tb.Fatalf("the metrics scraper's token: %v", err)
	}
	return tr.Status.Token
}

// Runtime is the Go runtime's own accounting of the operator (runtime/metrics, served on its metrics
// endpoint by controller-runtime's Go collector as go_*).
type Runtime struct {
	// GCCPU is /cpu/classes/gc/total:cpu-seconds; UsedCPU is the CPU time the process's Go code and runtime
	// used: /cpu/classes/total:cpu-seconds (GOMAXPROCS × the time it has run) less /cpu/classes/idle.
	GCCPU, UsedCPU float64
	// GCCycles is /gc/cycles/total:gc-cycles; LimiterLastEnabled the cycle in which the GC CPU limiter was
	// last enabled (/gc/limiter/last-enabled:gc-cycle, 0: never): the runtime caps the GC at half the CPU
	// when the heap cannot be kept within GOMEMLIMIT otherwise.
	GCCycles, LimiterLastEnabled float64
	// LiveHeap is /gc/heap/live:bytes (marked by the last GC), HeapGoal /gc/heap/goal:bytes, MemoryLimit
	// /gc/gomemlimit:bytes (GOMEMLIMIT as the process has it) and Mapped /memory/classes/total:bytes.
	LiveHeap, HeapGoal, MemoryLimit, Mapped float64
}

// runtimeMetrics are the series Runtime reads, by the client_golang name of each runtime/metrics sample.
var runtimeMetrics = map[string]func(*Runtime) *float64{
	"go_cpu_classes_gc_total_cpu_seconds_total": func(r *Runtime) *float64 { return &r.GCCPU },
	"go_cpu_classes_total_cpu_seconds_total":    func(r *Runtime) *float64 { return &r.UsedCPU },
	"go_cpu_classes_idle_cpu_seconds_total":     nil, // subtracted from the total
	"go_gc_cycles_total_gc_cycles_total":        func(r *Runtime) *float64 { return &r.GCCycles },
	"go_gc_limiter_last_enabled_gc_cycle":       func(r *Runtime) *float64 { return &r.LimiterLastEnabled },
	"go_gc_heap_live_bytes":                     func(r *Runtime) *float64 { return &r.LiveHeap },
	"go_gc_heap_goal_bytes":                     func(r *Runtime) *float64 { return &r.HeapGoal },
	"go_gc_gomemlimit_bytes":                    func(r *Runtime) *float64 { return &r.MemoryLimit },
	"go_memory_classes_total_bytes":             func(r *Runtime) *float64 { return &r.Mapped },
}

// Runtime scrapes the operator's metrics endpoint (Options.Metrics) once, as Prometheus would. The endpoint
// starts with the operator's manager: until it answers, Runtime returns the connection's error.
func (p *Process) Runtime(ctx context.Context) (Runtime, error) {
	if p.metricsURL == "" {
		return Runtime{}, fmt.Errorf("the operator (pid %d) serves no metrics: start it with Options.Metrics", p.PID)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, p.metricsURL, nil)
	if err != nil {
		return Runtime{}, err
	}
	req.Header.Set("Authorization", "Bearer "+p.token)
	resp, err := p.http.Do(req)
	if err != nil {
		return Runtime{}, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return Runtime{}, fmt.Errorf("%s: %s", p.metricsURL, resp.Status)
	}
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(resp.Body)
	if err != nil {
		return Runtime{}, fmt.Errorf("%s: %w", p.metricsURL, err)
	}
	return parseRuntime(families)
}

func parseRuntime(families map[string]*dto.MetricFamily) (Runtime, error) {
	var r Runtime
	var idle float64
	for name, field := range runtimeMetrics {
		f, ok := families[name]
		if !ok || len(f.GetMetric()) != 1 {
			return Runtime{}, fmt.Errorf("the operator's metrics have no single %s (the Go collector's runtime metrics)", name)
		}
		m := f.GetMetric()[0]
		v := m.GetGauge().GetValue()
		if m.Counter != nil {
			v = m.GetCounter().GetValue()
		}
		if field == nil {
			idle = v
			continue
		}
		*field(&r) = v
	}
	r.UsedCPU -= idle
	return r, nil
}

// GCShare is the part of the CPU the operator's Go code and runtime used from earlier to r that its
// garbage collector took (0 when it used none).
func (r Runtime) GCShare(earlier Runtime) float64 {
	used := r.UsedCPU - earlier.UsedCPU
	if used <= 0 {
		return 0
	}
	return (r.GCCPU - earlier.GCCPU) / used
}

// LimiterEngaged reports whether the GC CPU limiter was enabled in a cycle after earlier was read: the heap
// did not fit GOMEMLIMIT at the GC's usual share of the CPU.
func (r Runtime) LimiterEngaged(earlier Runtime) bool {
	return r.LimiterLastEnabled > earlier.GCCycles
}

// MiB is bytes in MiB.
func MiB(bytes float64) float64 { return bytes / (1 << 20) }
