package deploy

import (
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	monitoringv1 "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/model/rulefmt"
	"github.com/prometheus/prometheus/promql/parser"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
	"sigs.k8s.io/yaml"

	"github.com/lvms-dev/lvms/api/topolvm/driver"
	"github.com/lvms-dev/lvms/e2e/testenv"
	"github.com/lvms-dev/lvms/nodeagent/metrics"
	"github.com/lvms-dev/lvms/operator/admission"
	"github.com/lvms-dev/lvms/operator/provisioner"
)

// exportedMetrics are the metric names LVMS's processes serve (from their collectors' descriptions, so a
// renamed metric breaks this test), plus `up`, which Prometheus records for every target it scrapes.
func exportedMetrics(t *testing.T) map[string]bool {
	t.Helper()
	var collectors []prometheus.Collector
	collectors = append(collectors, metrics.NewExporter(nil, nil, "node", driver.New(false)).Collectors()...)
	collectors = append(collectors, provisioner.New(provisioner.Options{}).Collectors()...)
	collectors = append(collectors, admission.Missing)
	fqName := regexp.MustCompile(`fqName: "([^"]+)"`)
	out := map[string]bool{"up": true}
	// The operator and the agent serve controller-runtime's registry, which holds the Go runtime's metrics
	// (its Go collector with every runtime/metrics sample) and the process's.
	families, err := ctrlmetrics.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		for _, suffix := range []string{"", "_bucket", "_sum", "_count"} {
			out[f.GetName()+suffix] = true
		}
	}
	for _, c := range collectors {
		ch := make(chan *prometheus.Desc, 16)
		go func() { c.Describe(ch); close(ch) }()
		for d := range ch {
			m := fqName.FindStringSubmatch(d.String())
			if m == nil {
				t.Fatalf("no name in %s", d)
			}
			// A histogram is scraped as its series.
			for _, suffix := range []string{"", "_bucket", "_sum", "_count"} {
				out[m[1]+suffix] = true
			}
		}
	}
	return out
}

// The PrometheusRule is what Prometheus would load (the Prometheus rule parser with unknown fields refused),
// every expression reads only metrics LVMS exports, and every alert has a severity, a summary, a
// description and a runbook that exists in README.md.
func TestPrometheusRule_AlertsParseAndReadExportedMetrics(t *testing.T) {
	objs := render(t, "overlays/prometheus-operator")
	var rules []*unstructured.Unstructured
	for _, o := range objs {
		if o.GetKind() == "PrometheusRule" {
			rules = append(rules, o)
		}
	}
	if len(rules) != 1 {
		t.Fatalf("%d PrometheusRules rendered, want 1", len(rules))
	}
	var pr monitoringv1.PrometheusRule
	strictDecode(t, rules[0], &pr)
	groups, err := yaml.Marshal(map[string]any{"groups": pr.Spec.Groups})
	if err != nil {
		t.Fatal(err)
	}
	p := parser.NewParser(parser.Options{})
	parsed, errs := rulefmt.Parse(groups, false, model.UTF8Validation, p, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if len(errs) > 0 {
		t.Fatalf("Prometheus refuses the rules: %v", errs)
	}
	exported := exportedMetrics(t)
	readme, err := os.ReadFile(filepath.Join(testenv.RepoRoot(), "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	anchors := readmeAnchors(string(readme))
	var alerts []string
	for _, g := range parsed.Groups {
		for _, r := range g.Rules {
			if r.Alert == "" {
				continue
			}
			alerts = append(alerts, r.Alert)
			expr, err := p.ParseExpr(r.Expr)
			if err != nil {
				t.Fatalf("%s: %v", r.Alert, err)
			}
			parser.Inspect(expr, func(n parser.Node, _ []parser.Node) error {
				if vs, ok := n.(*parser.VectorSelector); ok && !exported[vs.Name] {
					t.Errorf("%s reads %s, which no LVMS component exports", r.Alert, vs.Name)
				}
				return nil
			})
			if s := r.Labels["severity"]; s != "warning" && s != "critical" {
				t.Errorf("%s: severity %q, want warning or critical", r.Alert, s)
			}
			for _, a := range []string{"summary", "description", "runbook_url"} {
				if r.Annotations[a] == "" {
					t.Errorf("%s has no %s", r.Alert, a)
				}
			}
			_, anchor, _ := strings.Cut(r.Annotations["runbook_url"], "README.md#")
			if !anchors[anchor] {
				t.Errorf("%s: runbook %q is not a section of README.md", r.Alert, r.Annotations["runbook_url"])
			}
		}
	}
	for _, want := range []string{"VolumeGroupUsageAtThresholdCritical", "ThinPoolDataUsageAtThresholdCritical",
		"ThinPoolMetaDataUsageAtThresholdCritical", "LVMSNodeAgentDown", "LogicalVolumeStuck", "LVMSAdmissionPolicyMissing", "LVMSGarbageCollectorThrashing"} {
		if !slices.Contains(alerts, want) {
			t.Errorf("no alert %s in %v", want, alerts)
		}
	}
}

// readmeAnchors are the GitHub anchors of README.md's headings.
func readmeAnchors(readme string) map[string]bool {
	out := map[string]bool{}
	drop := regexp.MustCompile("[^a-z0-9 _-]")
	for _, line := range strings.Split(readme, "\n") {
		if h, ok := strings.CutPrefix(line, "#"); ok {
			h = strings.TrimLeft(h, "# ")
			out[strings.ReplaceAll(drop.ReplaceAllString(strings.ToLower(h), ""), " ", "-")] = true
		}
	}
	return out
}

// Every ServiceMonitor selects exactly one rendered Service by its labels and scrapes a port that Service
// has; every Service's selector matches the pods that serve it and its target port is a named port of
// their container (the node agent's pods come from the operator: checked against its constants).
func TestMonitoring_ServiceMonitorsReachTheMetricsEndpoints(t *testing.T) {
	for _, dir := range []string{"overlays/openshift", "overlays/prometheus-operator"} {
		t.Run(dir, func(t *testing.T) {
			objs := render(t, dir)
			services := byKind(objs, "Service")
			monitors := byKind(objs, "ServiceMonitor")
			if len(monitors) != 2 {
				t.Fatalf("%d ServiceMonitors, want the operator's and the node agents'", len(monitors))
			}
			for _, o := range monitors {
				var sm monitoringv1.ServiceMonitor
				strictDecode(t, o, &sm)
				var hit []string
				for _, s := range services {
					if labels.SelectorFromSet(sm.Spec.Selector.MatchLabels).Matches(labels.Set(s.GetLabels())) {
						hit = append(hit, s.GetName())
						ports, _, _ := unstructured.NestedSlice(s.Object, "spec", "ports")
						for _, ep := range sm.Spec.Endpoints {
							if !slices.ContainsFunc(ports, func(p any) bool { return p.(map[string]any)["name"] == ep.Port }) {
								t.Errorf("ServiceMonitor %s scrapes port %q, Service %s has %v", sm.Name, ep.Port, s.GetName(), ports)
							}
							if ep.Scheme != "https" || ep.BearerTokenFile == "" { //nolint:staticcheck // the field scrapers still read
								t.Errorf("ServiceMonitor %s endpoint %+v: want HTTPS with the scraper's token", sm.Name, ep)
							}
						}
					}
				}
				if len(hit) != 1 {
					t.Errorf("ServiceMonitor %s selects Services %v, want exactly one", sm.Name, hit)
				}
			}
		})
	}
}

func byKind(objs []*unstructured.Unstructured, kind string) []*unstructured.Unstructured {
	var out []*unstructured.Unstructured
	for _, o := range objs {
		if o.GetKind() == kind {
			out = append(out, o)
		}
	}
	return out
}

// strictDecode decodes o into typed, refusing fields the type does not have (a typo would otherwise be
// dropped silently by an API server that prunes unknown fields).
func strictDecode(t *testing.T, o *unstructured.Unstructured, typed any) {
	t.Helper()
	b, err := o.MarshalJSON()
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.UnmarshalStrict(b, typed); err != nil {
		t.Fatalf("%s %s: %v", o.GetKind(), o.GetName(), err)
	}
}
