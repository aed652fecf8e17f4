package deploy

import (
	"context"
	"io"
	"log/slog"
	"slices"
	"strings"
	"testing"
	"time"

	monitoringv1 "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1"
	"github.com/prometheus/prometheus/model/histogram"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/promql"
	"github.com/prometheus/prometheus/storage"
	"github.com/prometheus/prometheus/tsdb/chunkenc"
	"github.com/prometheus/prometheus/tsdb/chunks"
	"github.com/prometheus/prometheus/util/annotations"
)

// seriesSet serves fixed series to the PromQL engine.
type seriesSet struct {
	series []storage.Series
	i      int
}

func (s *seriesSet) Next() bool                        { s.i++; return s.i <= len(s.series) }
func (s *seriesSet) At() storage.Series                { return s.series[s.i-1] }
func (s *seriesSet) Err() error                        { return nil }
func (s *seriesSet) Warnings() annotations.Annotations { return nil }

// sample is one float sample.
type sample struct {
	t int64
	f float64
}

func (s sample) T() int64                      { return s.t }
func (s sample) ST() int64                     { return 0 }
func (s sample) F() float64                    { return s.f }
func (s sample) H() *histogram.Histogram       { return nil }
func (s sample) FH() *histogram.FloatHistogram { return nil }
func (s sample) Type() chunkenc.ValueType      { return chunkenc.ValFloat }
func (s sample) Copy() chunks.Sample           { return s }

// scrape is what Prometheus holds after scraping node agents: one sample per series at t.
func scrape(t time.Time, series map[string]float64) storage.Queryable {
	var all []storage.Series
	keys := make([]string, 0, len(series))
	for k := range series {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		// k is name{l1="v1",...} written as name,l1,v1,...
		all = append(all, storage.NewListSeries(labels.FromStrings(strings.Split(k, ",")...), []chunks.Sample{sample{t.UnixMilli(), series[k]}}))
	}
	return &storage.MockQueryable{MockQuerier: &storage.MockQuerier{SelectMockFunction: func(_ bool, _ *storage.SelectHints, ms ...*labels.Matcher) storage.SeriesSet {
		var out []storage.Series
		for _, s := range all {
			if slices.ContainsFunc(ms, func(m *labels.Matcher) bool { return !m.Matches(s.Labels().Get(m.Name)) }) {
				continue
			}
			out = append(out, s)
		}
		return &seriesSet{series: out}
	}}}
}

// TestPrometheusRule_ThinPoolThresholdAlerts: the threshold alerts compare each pool's data and metadata
// usage with its own device class's thresholds, fire for exactly the pools near or past them, say which
// usage, and do not break when two agent pods of one node serve the same series (a rollout).
func TestPrometheusRule_ThinPoolThresholdAlerts(t *testing.T) {
	var pr monitoringv1.PrometheusRule
	for _, o := range render(t, "overlays/prometheus-operator") {
		if o.GetKind() == "PrometheusRule" {
			strictDecode(t, o, &pr)
		}
	}
	exprs := map[string]string{}
	for _, g := range pr.Spec.Groups {
		for _, r := range g.Rules {
			exprs[r.Alert] = r.Expr.String()
		}
	}
	now := time.Unix(1_700_000_000, 0)
	pool := func(pod, node, dc string, data, meta, dataT, metaT float64) map[string]float64 {
		l := ",node," + node + ",device_class," + dc + ",pod," + pod + ",job,lvms-node-agent-metrics"
		return map[string]float64{"__name__,topolvm_thinpool_data_percent" + l: data, "__name__,topolvm_thinpool_metadata_percent" + l: meta,
			"__name__,lvms_thinpool_data_usage_threshold_percent" + l: dataT, "__name__,lvms_thinpool_metadata_usage_threshold_percent" + l: metaT}
	}
	series := map[string]float64{}
	for _, p := range []map[string]float64{
		pool("a1", "n1", "empty", 10, 5, 90, 75),     // nothing
		pool("a1", "n1", "data-near", 80, 5, 90, 75), // data 10 points below 90
		pool("a1", "n1", "meta-past", 20, 75, 90, 75),
		pool("a2", "n2", "custom", 84, 5, 95, 75), // 84 is not near a 95 threshold
		pool("a2", "n2", "past", 97, 70, 95, 75),  // data past, metadata near
		pool("a3", "n2", "past", 97, 70, 95, 75),  // the same node's new pod during a rollout
	} {
		for k, v := range p {
			series[k] = v
		}
	}
	engine := promql.NewEngine(promql.EngineOpts{Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), MaxSamples: 10000,
		Timeout: time.Minute, LookbackDelta: 5 * time.Minute})
	for alert, want := range map[string][]string{
		"ThinPoolUsageNearThreshold": {"n1/data-near/data", "n1/meta-past/metadata", "n2/past/data", "n2/past/metadata"},
		"ThinPoolUsagePastThreshold": {"n1/meta-past/metadata", "n2/past/data"},
	} {
		expr, ok := exprs[alert]
		if !ok {
			t.Fatalf("no alert %s", alert)
		}
		q, err := engine.NewInstantQuery(context.Background(), scrape(now, series), nil, expr, now)
		if err != nil {
			t.Fatalf("%s: %v", alert, err)
		}
		res := q.Exec(context.Background())
		if res.Err != nil {
			t.Fatalf("%s: %v", alert, res.Err)
		}
		vec, err := res.Vector()
		if err != nil {
			t.Fatalf("%s: %v", alert, err)
		}
		var got []string
		for _, s := range vec {
			got = append(got, s.Metric.Get("node")+"/"+s.Metric.Get("device_class")+"/"+s.Metric.Get("usage"))
		}
		slices.Sort(got)
		if !slices.Equal(got, want) {
			t.Errorf("%s fires for %v, want %v", alert, got, want)
		}
	}
}
