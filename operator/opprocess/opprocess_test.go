package opprocess

import (
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	dto "github.com/prometheus/client_model/go"
	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"sigs.k8s.io/yaml"

	"github.com/lvms-dev/lvms/bench"
	"github.com/lvms-dev/lvms/deploy/olm"
	"github.com/lvms-dev/lvms/e2e/testenv"
	"github.com/lvms-dev/lvms/operator/names"
)

// The benchmarks' operator runs with what deploy/operator/deployment.yaml gives its container: every Go
// runtime variable it sets, with its value, and nothing else.
func TestEnv_IsTheDeploymentsRuntimeVariables(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join(testenv.RepoRoot(), "deploy", "operator", "deployment.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var d appsv1.Deployment
	if err := yaml.Unmarshal(raw, &d); err != nil {
		t.Fatal(err)
	}
	var want []string
	for _, e := range d.Spec.Template.Spec.Containers[0].Env {
		if slices.Contains(bench.RuntimeVariables, e.Name) {
			want = append(want, e.Name+"="+e.Value)
		}
	}
	got, err := Env(DefaultOverlay)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(got, want) {
		t.Errorf("Env(%q) = %q, want the Deployment's %q", DefaultOverlay, got, want)
	}
	if !slices.Contains(got, "GOGC="+names.OperatorGOGC) || !slices.ContainsFunc(got, func(v string) bool { return strings.HasPrefix(v, "GOMEMLIMIT=") }) {
		t.Errorf("Env(%q) = %q: the benchmarks would run without the Deployment's GOMEMLIMIT or GOGC=%s", DefaultOverlay, got, names.OperatorGOGC)
	}
}

// No install's GOMEMLIMIT is above its container's memory request: the Go runtime keeps its memory within
// what the scheduler reserved for the pod (a pod using more than its request is among the first evicted
// when the node runs short of memory), collecting harder as it nears the limit.
func TestEnv_MemoryLimitWithinRequest(t *testing.T) {
	for _, overlay := range []string{"kubernetes", "openshift", "microshift"} {
		env, err := Env(overlay)
		if err != nil {
			t.Fatal(err)
		}
		var limit string
		for _, v := range env {
			if l, ok := strings.CutPrefix(v, "GOMEMLIMIT="); ok {
				limit = l
			}
		}
		if limit == "" {
			t.Errorf("%s: the operator has no GOMEMLIMIT (env %q)", overlay, env)
			continue
		}
		request, err := memoryRequest(overlay)
		if err != nil {
			t.Fatal(err)
		}
		// GOMEMLIMIT's suffixes are the binary ones (MiB, GiB); a Quantity spells them Mi, Gi.
		q, err := resource.ParseQuantity(strings.TrimSuffix(limit, "B"))
		if err != nil {
			t.Fatalf("%s: GOMEMLIMIT=%s: %v", overlay, limit, err)
		}
		if q.Cmp(request) > 0 {
			t.Errorf("%s: GOMEMLIMIT=%s is above the memory request %s", overlay, limit, request.String())
		}
	}
}

func memoryRequest(overlay string) (resource.Quantity, error) {
	d, err := renderOperator(overlay)
	if err != nil {
		return resource.Quantity{}, err
	}
	return *d.Spec.Template.Spec.Containers[0].Resources.Requests.Memory(), nil
}

func renderOperator(overlay string) (*appsv1.Deployment, error) {
	objs, err := olm.Render(filepath.Join(testenv.RepoRoot(), "deploy", "overlays", overlay))
	if err != nil {
		return nil, err
	}
	for _, o := range objs {
		if o.GetKind() == "Deployment" && o.GetName() == "lvms-operator" {
			raw, err := o.MarshalJSON()
			if err != nil {
				return nil, err
			}
			var d appsv1.Deployment
			return &d, yaml.Unmarshal(raw, &d)
		}
	}
	return nil, os.ErrNotExist
}

// The runtime metrics are read from the Go collector's series; the GC's share is of the CPU the process
// used (available CPU less idle), not of GOMAXPROCS × time.
func TestParseRuntime(t *testing.T) {
	families := map[string]*dto.MetricFamily{}
	counter := func(name string, v float64) {
		families[name] = &dto.MetricFamily{Metric: []*dto.Metric{{Counter: &dto.Counter{Value: &v}}}}
	}
	gauge := func(name string, v float64) {
		families[name] = &dto.MetricFamily{Metric: []*dto.Metric{{Gauge: &dto.Gauge{Value: &v}}}}
	}
	counter("go_cpu_classes_gc_total_cpu_seconds_total", 3)
	counter("go_cpu_classes_total_cpu_seconds_total", 100)
	counter("go_cpu_classes_idle_cpu_seconds_total", 88)
	counter("go_gc_cycles_total_gc_cycles_total", 40)
	gauge("go_gc_limiter_last_enabled_gc_cycle", 0)
	gauge("go_gc_heap_live_bytes", 30<<20)
	gauge("go_gc_heap_goal_bytes", 45<<20)
	gauge("go_gc_gomemlimit_bytes", 60<<20)
	gauge("go_memory_classes_total_bytes", 50<<20)
	r, err := parseRuntime(families)
	if err != nil {
		t.Fatal(err)
	}
	if r.UsedCPU != 12 || r.GCCPU != 3 || MiB(r.MemoryLimit) != 60 || MiB(r.LiveHeap) != 30 {
		t.Errorf("parsed %+v", r)
	}
	if got := r.GCShare(Runtime{}); got != 0.25 {
		t.Errorf("GC share %v, want 0.25 (3 of 12 CPU seconds used)", got)
	}
	later := r
	later.LimiterLastEnabled = 41
	if r.LimiterEngaged(Runtime{GCCycles: 40}) || !later.LimiterEngaged(r) {
		t.Errorf("limiter: enabled in cycle %v after cycle %v reads %v", later.LimiterLastEnabled, r.GCCycles, later.LimiterEngaged(r))
	}
	delete(families, "go_gc_heap_live_bytes")
	if _, err := parseRuntime(families); err == nil || !strings.Contains(err.Error(), "go_gc_heap_live_bytes") {
		t.Errorf("a missing series: err %v, want it named", err)
	}
}

// The 5,000-node live heap figure's goal is what the manifest's GOMEMLIMIT holds at its GOGC: the live
// heap below which GOGC, not the limit, paces the collector (limit ÷ (1 + GOGC/100)), and its title names
// the manifest's values.
func TestFigures_LiveHeapGoalIsTheManifestsLimit(t *testing.T) {
	env, err := Env(DefaultOverlay)
	if err != nil {
		t.Fatal(err)
	}
	var limit, gogc string
	for _, v := range env {
		if l, ok := strings.CutPrefix(v, "GOMEMLIMIT="); ok {
			limit = l
		}
		if g, ok := strings.CutPrefix(v, "GOGC="); ok {
			gogc = g
		}
	}
	q, err := resource.ParseQuantity(strings.TrimSuffix(limit, "B"))
	if err != nil {
		t.Fatalf("GOMEMLIMIT=%s: %v", limit, err)
	}
	g, err := strconv.ParseFloat(gogc, 64)
	if err != nil {
		t.Fatalf("GOGC=%s: %v", gogc, err)
	}
	want := MiB(float64(q.Value())) / (1 + g/100)
	i := slices.IndexFunc(bench.Figures, func(f bench.Figure) bool { return f.Name == "nodeset-5000-live-heap" })
	if i < 0 {
		t.Fatal("no figure nodeset-5000-live-heap in bench/figures.go")
	}
	f := bench.Figures[i]
	if f.Goal == nil || math.Abs(f.Goal.Value-want) > 0.5 {
		t.Errorf("figure %s: goal %v, want < %.0f MiB (GOMEMLIMIT=%s at GOGC=%s)", f.Name, f.Goal, want, limit, gogc)
	}
	if !strings.Contains(f.Title, "GOMEMLIMIT="+limit) || !strings.Contains(f.Title, "GOGC="+gogc) {
		t.Errorf("figure %s's title %q does not name the manifest's GOMEMLIMIT=%s and GOGC=%s", f.Name, f.Title, limit, gogc)
	}
}
