package collect

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/utils/clock"

	"github.com/lvms-dev/lvms/diagnostics/analyze"
	"github.com/lvms-dev/lvms/diagnostics/bundle"
	"github.com/lvms-dev/lvms/diagnostics/redact"
)

// Defaults of Options.
const (
	DefaultTimeout = 10 * time.Minute
	// DefaultMaxBytes leaves room, under what a reader accepts by default (bundle.DefaultMaxTotalBytes), for the
	// files written after the collected data (analysis.json, the manifest): about 27 MB at 5,000 nodes. A bundle
	// written with the defaults is always read with them.
	DefaultMaxBytes      = bundle.DefaultMaxTotalBytes - 64<<20
	DefaultLogLimitBytes = 16 << 20
	DefaultConcurrency   = 8
	// CollectorTimeout bounds one collector (one resource, one pod's logs, one node's view).
	CollectorTimeout = 2 * time.Minute
)

// Agent access modes.
const (
	// AccessProxy reaches node agents through the API server's pods/proxy (from anywhere).
	AccessProxy = "proxy"
	// AccessDirect connects to the agent pods' IPs (from inside the cluster: the must-gather pod).
	AccessDirect = "direct"
)

// Options configure a collection.
type Options struct {
	// Config reaches the cluster as the person (or must-gather pod) collecting.
	Config *rest.Config
	// Cluster names the cluster in the bundle (kubeconfig context); default the API server URL.
	Cluster string
	// Namespaces to collect LVMS's pods, logs and namespaced objects from; empty: every namespace holding
	// LVMS objects or node agent pods.
	Namespaces []string
	// Since bounds logs and events (zero: everything the cluster still has).
	Since time.Time
	// Timeout bounds the collection (default DefaultTimeout).
	Timeout time.Duration
	// MaxBytes bounds the collected data, uncompressed (default DefaultMaxBytes).
	MaxBytes int64
	// LogLimitBytes bounds each container log (default DefaultLogLimitBytes).
	LogLimitBytes int64
	// NoLogs and NoAgentViews leave those collectors out.
	NoLogs, NoAgentViews bool
	// AgentAccess is AccessProxy (default) or AccessDirect.
	AgentAccess string
	// AgentToken is the bearer token for the node agents; empty: see AgentServiceAccount.
	AgentToken string
	// AgentServiceAccount ("namespace/name") a short-lived diagnostics token is minted for; empty:
	// DefaultAgentServiceAccount in the node agents' namespace. The caller's own token is never sent.
	AgentServiceAccount string
	// Concurrency of collectors (default DefaultConcurrency).
	Concurrency int
	// Version and Commit of this lvms, recorded in the bundle.
	Version, Commit string
	// Progress is told about each collector; nil shows nothing.
	Progress Progress
	// Clock tells the time (default the real clock; tests pass a fake).
	Clock clock.PassiveClock

	// Logs and Agents replace the cluster for those collectors (tests).
	Logs   LogSource
	Agents AgentFetcher
}

func (o Options) withDefaults() Options {
	if o.Timeout <= 0 {
		o.Timeout = DefaultTimeout
	}
	if o.MaxBytes <= 0 {
		o.MaxBytes = DefaultMaxBytes
	}
	if o.LogLimitBytes <= 0 {
		o.LogLimitBytes = DefaultLogLimitBytes
	}
	if o.Concurrency <= 0 {
		o.Concurrency = DefaultConcurrency
	}
	if o.AgentAccess == "" {
		o.AgentAccess = AccessProxy
	}
	if o.Clock == nil {
		o.Clock = clock.RealClock{}
	}
	if o.Cluster == "" && o.Config != nil {
		o.Cluster = o.Config.Host
	}
	if o.Progress == nil {
		o.Progress = noProgress{}
	}
	return o
}

// Summary is what a collection produced.
type Summary struct {
	Manifest   bundle.Manifest
	Redactions redact.Report
	Findings   []analyze.Finding
	// Bytes of collected data written (uncompressed, before the metadata files).
	Bytes int64
}

// Run collects a bundle into w and closes it. Collector failures are recorded in the manifest, not
// returned; the error is for what makes a bundle impossible (no clients, the writer failing).
func Run(ctx context.Context, opts Options, w *bundle.Writer) (*Summary, error) {
	opts = opts.withDefaults()
	if opts.AgentAccess != AccessProxy && opts.AgentAccess != AccessDirect {
		return nil, fmt.Errorf("agent access %q: use %q or %q", opts.AgentAccess, AccessProxy, AccessDirect)
	}
	r, err := newRun(opts, w)
	if err != nil {
		return nil, err
	}
	if err := r.reachable(ctx); err != nil {
		return nil, err
	}
	timed, cancel := context.WithTimeout(ctx, opts.Timeout)
	defer cancel()
	r.collect(timed)
	r.manifest.TimedOut = errors.Is(timed.Err(), context.DeadlineExceeded)
	r.manifest.Finished = opts.Clock.Now().UTC()
	return r.finish()
}

// run is one collection in progress.
type run struct {
	opts Options
	w    *bundle.Writer
	red  *redact.Redactor
	cs   kubernetes.Interface
	dyn  dynamic.Interface
	disc discovery.DiscoveryInterface
	// hc reaches the API server for what the typed clients do not ask for (server-side Tables).
	hc *http.Client

	mu sync.Mutex
	// tables are the server's Tables of what was collected, written by writeTables.
	tables   map[schema.GroupResource]*bundle.Table
	manifest bundle.Manifest
	facts    facts
	// mirror keeps every file but logs, to analyze the bundle at the end.
	mirror map[string][]byte
	done   int
	total  int
}

func newRun(opts Options, w *bundle.Writer) (*run, error) {
	if opts.Config == nil {
		return nil, errors.New("no cluster configuration")
	}
	cfg := rest.CopyConfig(opts.Config)
	if cfg.QPS == 0 {
		cfg.QPS, cfg.Burst = 50, 100
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("client for %s: %w", cfg.Host, err)
	}
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("dynamic client for %s: %w", cfg.Host, err)
	}
	disc, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("discovery client for %s: %w", cfg.Host, err)
	}
	hc, err := rest.HTTPClientFor(cfg)
	if err != nil {
		return nil, fmt.Errorf("HTTP client for %s: %w", cfg.Host, err)
	}
	start := opts.Clock.Now().UTC()
	r := &run{opts: opts, w: w, red: redact.New(), cs: cs, dyn: dyn, disc: disc, hc: hc, mirror: map[string][]byte{}, facts: newFacts()}
	r.manifest = bundle.Manifest{Format: bundle.FormatVersion, Product: bundle.Product, Version: opts.Version, Commit: opts.Commit,
		Started: start, Cluster: opts.Cluster, Server: cfg.Host, Namespaces: []string{},
		Options: bundle.Options{Since: opts.Since, MaxBytes: opts.MaxBytes, Timeout: opts.Timeout.String(), LogLimitBytes: opts.LogLimitBytes,
			Logs: !opts.NoLogs, AgentViews: !opts.NoAgentViews}}
	if !opts.NoAgentViews {
		r.manifest.Options.AgentAccess = opts.AgentAccess
	}
	return r, nil
}

// ReachTimeout bounds the first request, which tells whether the API server answers at all.
const ReachTimeout = 15 * time.Second

// UnreachableError is the API server not answering: nothing can be collected, so there is no bundle.
type UnreachableError struct {
	Server string
	Err    error
}

func (e *UnreachableError) Error() string {
	return fmt.Sprintf("cannot reach the API server at %s: %v; check --kubeconfig (or --context) and that the cluster is up; nothing was collected",
		e.Server, e.Err)
}

func (e *UnreachableError) Unwrap() error { return e.Err }

// reachable asks the API server for its version. Any HTTP answer, even 401 or 403, means it is there (the
// collectors record what they may not read); no answer at all ends the collection before it writes a bundle
// that would only say "the cluster does not serve ..." for every resource.
func (r *run) reachable(ctx context.Context) error {
	probe, cancel := context.WithTimeout(ctx, ReachTimeout)
	defer cancel()
	err := r.cs.Discovery().RESTClient().Get().AbsPath("/version").Do(probe).Error()
	var status apierrors.APIStatus
	if err == nil || errors.As(err, &status) || ctx.Err() != nil {
		return nil // answered, or the caller stopped the collection: the bundle records that instead
	}
	return &UnreachableError{Server: r.manifest.Server, Err: err}
}

// collector is one unit of collection; it writes files through the tally.
type collector struct {
	name string
	run  func(ctx context.Context, t *tally) error
}

// tally counts what one collector wrote.
type tally struct {
	r       *run
	files   int
	bytes   int64
	skipped int
}

// write redacts data and writes it; a file past the size limit is counted as skipped, not failed.
func (t *tally) write(path string, data []byte) error {
	data = t.r.red.Text(path, data)
	err := t.r.w.WriteFile(path, data)
	if errors.Is(err, bundle.ErrSizeLimit) {
		t.skipped++
		t.r.mu.Lock()
		t.r.manifest.SizeLimitReached = true
		t.r.mu.Unlock()
		return nil
	}
	if err != nil {
		return err
	}
	t.files++
	t.bytes += int64(len(data))
	if !strings.Contains(path, "/logs/") {
		t.r.mu.Lock()
		t.r.mirror[path] = data
		t.r.mu.Unlock()
	}
	return nil
}

// runAll runs collectors, Concurrency at a time, and records each outcome in order.
func (r *run) runAll(ctx context.Context, cs []collector) {
	results := make([]bundle.CollectorRun, len(cs))
	r.mu.Lock()
	r.total += len(cs)
	r.mu.Unlock()
	sem := make(chan struct{}, r.opts.Concurrency)
	var wg sync.WaitGroup
	for i, c := range cs {
		results[i].Name = c.name
		if ctx.Err() != nil {
			results[i].Error = fmt.Sprintf("not run: the collection stopped (%v); raise --timeout", context.Cause(ctx))
			r.progress(c.name)
			continue
		}
		sem <- struct{}{}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			cctx, cancel := context.WithTimeout(ctx, CollectorTimeout)
			defer cancel()
			t := &tally{r: r}
			start := r.opts.Clock.Now()
			err := c.run(cctx, t)
			results[i].Duration = r.opts.Clock.Now().Sub(start)
			results[i].Files, results[i].Bytes, results[i].Skipped = t.files, t.bytes, t.skipped
			if err != nil {
				results[i].Error = err.Error()
			}
			r.progress(c.name)
		}()
	}
	wg.Wait()
	r.mu.Lock()
	r.manifest.Collectors = append(r.manifest.Collectors, results...)
	r.mu.Unlock()
}

func (r *run) progress(name string) {
	r.mu.Lock()
	r.done++
	done, total := r.done, r.total
	r.mu.Unlock()
	r.opts.Progress.Update(done, total, name)
}

// collect runs the phases: each one's collectors depend on what earlier phases found.
func (r *run) collect(ctx context.Context) {
	r.runAll(ctx, []collector{{name: "cluster", run: r.collectCluster}})
	r.runAll(ctx, r.phaseOne())
	r.settleNamespaces()
	r.runAll(ctx, r.phaseTwo())
	r.runAll(ctx, r.phaseThree())
	r.runAll(ctx, []collector{{name: "tables", run: r.writeTables}})
	r.runAll(ctx, r.phaseFour(ctx))
}

// finish writes the analysis, the redaction report, the manifest and the version file, and closes.
func (r *run) finish() (*Summary, error) {
	r.opts.Progress.Done()
	s := &Summary{Bytes: r.w.Written()}
	r.mu.Lock()
	mirror := r.mirror
	r.mu.Unlock()
	manifestJSON, err := json.MarshalIndent(r.manifest, "", "  ")
	if err != nil {
		return nil, fmt.Errorf("manifest: %w", err)
	}
	files := map[string][]byte{bundle.FileVersion: bundle.VersionFile(r.opts.Version), bundle.FileManifest: manifestJSON}
	for k, v := range mirror {
		files[k] = v
	}
	if b, err := bundle.Decode(bundle.NewFiles("collected", files)); err == nil {
		s.Findings = analyze.Run(b)
	} else {
		s.Findings = []analyze.Finding{{CheckName: "BundleReadable", Severity: analyze.Fail, Title: "The bundle could not be analyzed",
			Message: err.Error(), Fix: "Report this as a bug in lvms, with the bundle."}}
	}
	analysis, err := analyze.Marshal(s.Findings)
	if err != nil {
		return nil, fmt.Errorf("analysis: %w", err)
	}
	// The metadata files quote error messages and names from the cluster: they are redacted too.
	analysis, manifestJSON = r.red.Text(bundle.FileAnalysis, analysis), r.red.Text(bundle.FileManifest, manifestJSON)
	s.Redactions = r.red.Report()
	redactions, err := json.MarshalIndent(s.Redactions, "", "  ")
	if err != nil {
		return nil, fmt.Errorf("redaction report: %w", err)
	}
	s.Manifest = r.manifest
	for _, f := range []struct {
		name string
		data []byte
	}{{bundle.FileAnalysis, analysis}, {bundle.FileRedactions, redactions}, {bundle.FileManifest, manifestJSON}, {bundle.FileVersion, bundle.VersionFile(r.opts.Version)}} {
		if err := r.w.WriteMeta(f.name, f.data); err != nil {
			_ = r.w.Close()
			return nil, err
		}
	}
	if err := r.w.Close(); err != nil {
		return nil, fmt.Errorf("finish the bundle: %w", err)
	}
	return s, nil
}

// settleNamespaces fixes the namespaces whose pods, logs and namespaced objects are collected.
func (r *run) settleNamespaces() {
	r.mu.Lock()
	defer r.mu.Unlock()
	ns := slices.Clone(r.opts.Namespaces)
	if len(ns) == 0 {
		ns = r.facts.foundNamespaces()
	}
	slices.Sort(ns)
	r.facts.namespaces = slices.Compact(ns)
	r.manifest.Namespaces = slices.Clone(r.facts.namespaces)
}

// phaseFour: container logs and node agent views, for the pods found earlier.
func (r *run) phaseFour(ctx context.Context) []collector {
	var cs []collector
	if !r.opts.NoLogs {
		cs = append(cs, r.logCollectors()...)
	}
	if !r.opts.NoAgentViews {
		cs = append(cs, r.agentCollectors(ctx)...)
	}
	return cs
}

// RootName is the top directory of a bundle collected at t: lvms-bundle-<UTC time>.
func RootName(t time.Time) string { return "lvms-bundle-" + t.UTC().Format("20060102T150405Z") }

// WriteTarGz collects a bundle as a gzip-compressed tar on out, bounded by opts.MaxBytes.
func WriteTarGz(ctx context.Context, opts Options, out io.Writer) (*Summary, error) {
	opts = opts.withDefaults()
	now := opts.Clock.Now()
	w, err := bundle.NewTarWriter(out, RootName(now), opts.MaxBytes, now)
	if err != nil {
		return nil, err
	}
	return Run(ctx, opts, w)
}

// WriteDir collects a bundle into the existing directory dir (must-gather's /must-gather), bounded by
// opts.MaxBytes.
func WriteDir(ctx context.Context, opts Options, dir string) (*Summary, error) {
	opts = opts.withDefaults()
	w, err := bundle.NewDirWriter(dir, opts.MaxBytes, opts.Clock.Now())
	if err != nil {
		return nil, err
	}
	return Run(ctx, opts, w)
}
