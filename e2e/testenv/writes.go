package testenv

import (
	"context"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"strings"
	"sync"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

// Writes counts the write requests (POST, PUT, PATCH, DELETE) a client sends to the API server, by verb and
// resource path, so a test can assert how much work a component does (a regression guard that counts
// instead of timing). Lease writes are counted apart: they are how LVMS says it is alive.
type Writes struct {
	mu     sync.Mutex
	counts map[string]int // "PATCH /apis/lvm.topolvm.io/v2alpha1/…/lvmnodes/status"
}

// Config returns a copy of cfg whose requests are counted.
func (w *Writes) Config(cfg *rest.Config) *rest.Config {
	c := rest.CopyConfig(cfg)
	c.Wrap(func(rt http.RoundTripper) http.RoundTripper {
		return roundTripper(func(req *http.Request) (*http.Response, error) {
			if req.Method != http.MethodGet && req.Method != http.MethodHead {
				w.add(req.Method + " " + resourcePath(req.URL.Path))
			}
			return rt.RoundTrip(req)
		})
	})
	return c
}

type roundTripper func(*http.Request) (*http.Response, error)

func (f roundTripper) RoundTrip(req *http.Request) (*http.Response, error) { return f(req) }

func (w *Writes) add(key string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.counts == nil {
		w.counts = map[string]int{}
	}
	w.counts[key]++
}

// Total is the number of writes so far, Leases excluded.
func (w *Writes) Total() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	n := 0
	for k, c := range w.counts {
		if !isLease(k) {
			n += c
		}
	}
	return n
}

// Leases is the number of Lease writes so far.
func (w *Writes) Leases() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	n := 0
	for k, c := range w.counts {
		if isLease(k) {
			n += c
		}
	}
	return n
}

// Snapshot returns the counts so far, for comparing two moments with Since.
func (w *Writes) Snapshot() map[string]int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return maps.Clone(w.counts)
}

// Since describes the writes made after an earlier Snapshot, Leases excluded, one "N× VERB path" per
// line; empty when there were none.
func (w *Writes) Since(before map[string]int) string {
	now := w.Snapshot()
	var lines []string
	for _, k := range slices.Sorted(maps.Keys(now)) {
		if d := now[k] - before[k]; d > 0 && !isLease(k) {
			lines = append(lines, fmt.Sprintf("%d× %s", d, k))
		}
	}
	return strings.Join(lines, "\n")
}

// CountSince is the number of writes after an earlier Snapshot, Leases excluded; with fragments, only of
// the "VERB path" keys that contain one of them ("/lvmnodesets/*/status").
func (w *Writes) CountSince(before map[string]int, fragments ...string) int {
	n := 0
	for k, c := range w.Snapshot() {
		if !isLease(k) && (len(fragments) == 0 || slices.ContainsFunc(fragments, func(f string) bool { return strings.Contains(k, f) })) {
			n += c - before[k]
		}
	}
	return n
}

func isLease(key string) bool { return strings.Contains(key, "/apis/coordination.k8s.io/") }

// resourcePath drops object names from an API path, keeping the group, version, resource and
// subresource: /api/v1/namespaces/ns/pods/p/status → /api/v1/namespaces/*/pods/*/status.
func resourcePath(p string) string {
	parts := strings.Split(strings.Trim(p, "/"), "/")
	res := 2 // the resource's position: after "api", "v1" or "apis", group, version
	if parts[0] == "apis" {
		res = 3
	}
	if len(parts) > res+1 && parts[res] == "namespaces" {
		parts[res+1] = "*"
		if len(parts) > res+2 {
			res += 2 // a namespaced resource
		}
	}
	if len(parts) > res+1 {
		parts[res+1] = "*"
	}
	return "/" + strings.Join(parts, "/")
}

// ServerWrites is the number of write requests the API server has served so far, from every client,
// Leases apart, read from its apiserver_request_total metric. Differences of two readings count what
// processes the test cannot wrap (an lvms process) did in between.
func ServerWrites(ctx context.Context, cfg *rest.Config) (int, error) {
	c, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return 0, err
	}
	body, err := c.CoreV1().RESTClient().Get().AbsPath("/metrics").DoRaw(ctx)
	if err != nil {
		return 0, fmt.Errorf("read the API server's metrics: %w", err)
	}
	return sumWrites(string(body))
}

// sumWrites adds up apiserver_request_total over write verbs, Leases apart.
func sumWrites(metrics string) (int, error) {
	p := expfmt.NewTextParser(model.UTF8Validation)
	families, err := p.TextToMetricFamilies(strings.NewReader(metrics))
	if err != nil {
		return 0, fmt.Errorf("parse the API server's metrics: %w", err)
	}
	fam, ok := families["apiserver_request_total"]
	if !ok {
		return 0, fmt.Errorf("the API server reports no apiserver_request_total")
	}
	total := 0.0
	for _, m := range fam.GetMetric() {
		labels := map[string]string{}
		for _, l := range m.GetLabel() {
			labels[l.GetName()] = l.GetValue()
		}
		switch labels["verb"] {
		case "POST", "PUT", "PATCH", "APPLY", "DELETE", "DELETECOLLECTION":
			if labels["resource"] != "leases" {
				total += m.GetCounter().GetValue()
			}
		}
	}
	return int(total), nil
}
