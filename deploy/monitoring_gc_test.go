package deploy

import (
	"context"
	"io"
	"log/slog"
	"slices"
	"testing"
	"time"

	monitoringv1 "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/promql"
	"github.com/prometheus/prometheus/storage"
	"github.com/prometheus/prometheus/tsdb/chunks"
)

// TestPrometheusRule_GarbageCollectorThrashing: the alert fires for a process whose garbage collector took
// over half of the CPU it used over the last 10 minutes, and not for a busy process collecting at its usual
// share nor for an idle one whose only work is the collection it forces when it trims its memory.
func TestPrometheusRule_GarbageCollectorThrashing(t *testing.T) {
	var pr monitoringv1.PrometheusRule
	for _, o := range render(t, "overlays/prometheus-operator") {
		if o.GetKind() == "PrometheusRule" {
			strictDecode(t, o, &pr)
		}
	}
	var expr string
	for _, g := range pr.Spec.Groups {
		for _, r := range g.Rules {
			if r.Alert == "LVMSGarbageCollectorThrashing" {
				expr = r.Expr.String()
			}
		}
	}
	if expr == "" {
		t.Fatal("no alert LVMSGarbageCollectorThrashing")
	}
	now := time.Unix(1_700_000_000, 0)
	var all []storage.Series
	// process adds the Go collector's CPU counters of a process with GOMAXPROCS 2 scraped every 30 s for
	// 15 minutes, using used cores, gc of them in its garbage collector.
	process := func(job, instance string, used, gc float64) {
		for name, perSecond := range map[string]float64{"go_cpu_classes_total_cpu_seconds_total": 2, "go_cpu_classes_idle_cpu_seconds_total": 2 - used,
			"go_cpu_classes_gc_total_cpu_seconds_total": gc * used} {
			var samples []chunks.Sample
			for s := 0; s <= 15*60; s += 30 {
				samples = append(samples, sample{now.Add(time.Duration(s-15*60) * time.Second).UnixMilli(), 1000 + perSecond*float64(s)})
			}
			all = append(all, storage.NewListSeries(labels.FromStrings("__name__", name, "job", job, "instance", instance), samples))
		}
	}
	process("lvms-operator-metrics", "thrashing", 0.5, 0.7)
	process("lvms-operator-metrics", "busy", 1.2, 0.2)
	process("lvms-node-agent-metrics", "idle", 0.005, 0.9)
	process("lvms-node-agent-metrics", "agent-thrashing", 0.3, 0.6)
	process("someone-else", "thrashing", 0.5, 0.7)
	queryable := &storage.MockQueryable{MockQuerier: &storage.MockQuerier{SelectMockFunction: func(_ bool, _ *storage.SelectHints, ms ...*labels.Matcher) storage.SeriesSet {
		var out []storage.Series
		for _, s := range all {
			if !slices.ContainsFunc(ms, func(m *labels.Matcher) bool { return !m.Matches(s.Labels().Get(m.Name)) }) {
				out = append(out, s)
			}
		}
		return &seriesSet{series: out}
	}}}
	engine := promql.NewEngine(promql.EngineOpts{Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), MaxSamples: 100000,
		Timeout: time.Minute, LookbackDelta: 5 * time.Minute})
	q, err := engine.NewInstantQuery(context.Background(), queryable, nil, expr, now)
	if err != nil {
		t.Fatal(err)
	}
	res := q.Exec(context.Background())
	if res.Err != nil {
		t.Fatal(res.Err)
	}
	vec, err := res.Vector()
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, s := range vec {
		got = append(got, s.Metric.Get("instance"))
		if s.Metric.Get("instance") == "thrashing" && (s.F < 0.69 || s.F > 0.71) {
			t.Errorf("the alert's value is %v, want the GC's share of the CPU used, 0.7", s.F)
		}
	}
	slices.Sort(got)
	if want := []string{"agent-thrashing", "thrashing"}; !slices.Equal(got, want) {
		t.Errorf("LVMSGarbageCollectorThrashing fires for %v, want %v", got, want)
	}
}
