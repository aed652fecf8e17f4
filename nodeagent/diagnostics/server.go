package diagnostics

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"net/http"
	"os"
	"strings"
	"sync"
	"time"

	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/lvms-dev/lvms/nodeagent/blockdev"
	"github.com/lvms-dev/lvms/nodeagent/desired"
	"github.com/lvms-dev/lvms/nodeagent/filter"
	"github.com/lvms-dev/lvms/nodeagent/lvm"
	"github.com/lvms-dev/lvms/nodeagent/lvmd"
)

// DefaultCommandTimeout bounds each host command a view runs.
const DefaultCommandTimeout = 30 * time.Second

// maxEmbeddedOutput caps the output quoted in a section error.
const maxEmbeddedOutput = 512

// Options configure a Server.
type Options struct {
	// Node is the node the agent runs on.
	Node string
	// Version of the agent's binary, reported in the view.
	Version string
	// Runner runs lsblk, wipefs and lvm2 exactly as the agent does (prefix, environment, devices file).
	Runner lvm.Runner
	// Root is the file system root for /dev/disk links and /sys (default "/").
	Root string
	// LVMDConfigPath is the lvmd.yaml the agent writes or reads (default lvmd.DefaultPath).
	LVMDConfigPath string
	// Desired returns the desired state the agent works from, for the verdicts. Nil, or a nil Node, leaves
	// the verdicts out with an error saying why.
	Desired func(ctx context.Context) (*desired.Node, error)
	// MinDeviceSize overrides filter.DefaultMinSize, as the agent does.
	MinDeviceSize uint64
	// Authorizer decides who may read the view. Required: the endpoint is never open.
	Authorizer Authorizer
	// CommandTimeout bounds each host command (default DefaultCommandTimeout).
	CommandTimeout time.Duration
	// Clock tells the time (default the real clock; tests pass a fake).
	Clock clock.PassiveClock
}

// Server serves the diagnostics view.
type Server struct {
	opts Options
	disc *blockdev.Discoverer
	// mu serializes views: one set of host commands at a time, however many clients ask.
	mu sync.Mutex
}

var _ http.Handler = (*Server)(nil)

// New returns a server for opts.
func New(opts Options) (*Server, error) {
	if opts.Node == "" {
		return nil, errors.New("diagnostics endpoint: the node name is empty")
	}
	if opts.Authorizer == nil {
		return nil, errors.New("diagnostics endpoint: no authorizer: the endpoint must check who calls it")
	}
	if opts.LVMDConfigPath == "" {
		opts.LVMDConfigPath = lvmd.DefaultPath
	}
	if opts.CommandTimeout <= 0 {
		opts.CommandTimeout = DefaultCommandTimeout
	}
	if opts.Clock == nil {
		opts.Clock = clock.RealClock{}
	}
	return &Server{opts: opts, disc: &blockdev.Discoverer{Runner: opts.Runner, Root: opts.Root}}, nil
}

// ServeHTTP serves GET Path to authorized callers.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path != Path {
		http.Error(w, "not found: the diagnostics view is at "+Path, http.StatusNotFound)
		return
	}
	if r.Method != http.MethodGet {
		w.Header().Set("Allow", http.MethodGet)
		http.Error(w, "method not allowed: use GET", http.StatusMethodNotAllowed)
		return
	}
	logger := log.FromContext(r.Context()).WithValues("node", s.opts.Node)
	user, err := s.opts.Authorizer.Authorize(r.Context(), r)
	if err != nil {
		code, msg := statusOf(err)
		if code >= http.StatusInternalServerError {
			logger.Error(err, "Could not check a diagnostics request", "remote", r.RemoteAddr)
		} else {
			logger.Info("Refused a diagnostics request", "remote", r.RemoteAddr, "reason", err.Error())
		}
		http.Error(w, msg, code)
		return
	}
	logger.Info("Serving the diagnostics view", "user", user)
	v := s.View(r.Context())
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	if err := json.NewEncoder(w).Encode(v); err != nil {
		logger.Error(err, "Could not write the diagnostics view", "user", user)
	}
}

// View reads the node's state now. Sections that fail are listed in View.Errors; the others are filled.
func (s *Server) View(ctx context.Context) *View {
	s.mu.Lock()
	defer s.mu.Unlock()
	v := &View{APIVersion: ViewAPIVersion, Node: s.opts.Node, Version: s.opts.Version, Time: s.opts.Clock.Now().UTC()}
	fail := func(section string, err error) {
		v.Errors = append(v.Errors, SectionError{Section: section, Error: err.Error()})
	}

	if out, err := s.lsblk(ctx); err != nil {
		fail(SectionLsblk, err)
	} else {
		v.Lsblk = out
	}
	report, raw, err := s.fullReport(ctx)
	if err != nil {
		fail(SectionFullReport, err)
	} else {
		v.FullReport = raw
	}
	v.LVMD = s.lvmdFile()
	if verdicts, err := s.verdicts(ctx, report); err != nil {
		fail(SectionVerdicts, err)
	} else {
		v.Verdicts = verdicts
	}
	return v
}

func (s *Server) withTimeout(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, s.opts.CommandTimeout)
}

// lsblk runs lsblk as discovery does (falling back to the columns of old util-linux) and returns its JSON.
func (s *Server) lsblk(ctx context.Context) (json.RawMessage, error) {
	ctx, cancel := s.withTimeout(ctx)
	defer cancel()
	out, err := s.opts.Runner.Run(ctx, "lsblk", blockdev.LsblkArgs(blockdev.Columns)...)
	if err != nil && strings.Contains(strings.ToLower(err.Error()), "unknown column") {
		out, err = s.opts.Runner.Run(ctx, "lsblk", blockdev.LsblkArgs(blockdev.LegacyColumns)...)
	}
	if err != nil {
		return nil, fmt.Errorf("lsblk: %w", err)
	}
	if !json.Valid(out) {
		return nil, fmt.Errorf("lsblk printed output that is not JSON: %q", clip(out))
	}
	return out, nil
}

// FullReportArgs are the arguments of the read-only fullreport the view runs: --readonly takes no locks and
// never writes metadata, so diagnostics cannot hang on a lock or change anything.
func FullReportArgs() []string { return append([]string{"--readonly"}, lvm.FullReportArgs()...) }

// fullReport runs a read-only fullreport and returns it parsed (for the verdicts) and as printed.
func (s *Server) fullReport(ctx context.Context) (*lvm.Report, json.RawMessage, error) {
	ctx, cancel := s.withTimeout(ctx)
	defer cancel()
	out, err := s.opts.Runner.LVMCmd(ctx, "fullreport", FullReportArgs()...)
	if err != nil {
		return nil, nil, fmt.Errorf("lvm fullreport: %w", err)
	}
	rep, err := lvm.ParseReport(out)
	if err != nil {
		return nil, nil, fmt.Errorf("lvm fullreport: %w", err)
	}
	if !json.Valid(out) {
		return nil, nil, fmt.Errorf("lvm fullreport printed output that is not JSON: %q", clip(out))
	}
	return rep, out, nil
}

// lvmdFile reads lvmd.yaml and says whether it is valid.
func (s *Server) lvmdFile() *LVMDFile {
	f := &LVMDFile{Path: s.opts.LVMDConfigPath}
	data, err := os.ReadFile(f.Path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return f
	case err != nil:
		f.Invalid = "cannot read: " + err.Error()
		return f
	}
	f.Exists, f.Content = true, string(data)
	cfg, err := lvmd.Parse(data)
	if err == nil {
		err = cfg.Validate()
	}
	if err != nil {
		f.Invalid = err.Error()
	}
	return f
}

// verdicts runs discovery and the filter pipeline over the agent's desired state.
func (s *Server) verdicts(ctx context.Context, report *lvm.Report) ([]VolumeGroupVerdicts, error) {
	if s.opts.Desired == nil {
		return nil, errors.New("the agent has not wired its desired state into the diagnostics endpoint")
	}
	if report == nil {
		return nil, errors.New("no verdicts without the LVM report (see the fullreport error)")
	}
	node, err := s.opts.Desired(ctx)
	if err != nil {
		return nil, fmt.Errorf("desired state: %w", err)
	}
	if node == nil {
		return nil, errors.New("the agent has no desired state yet (no LVMNode or LVMVolumeGroup selects this node)")
	}
	ctx, cancel := s.withTimeout(ctx)
	defer cancel()
	inv, err := s.disc.Discover(ctx)
	if err != nil {
		return nil, fmt.Errorf("discover block devices: %w", err)
	}
	var fvgs []filter.VolumeGroup
	var out []VolumeGroupVerdicts
	for _, vg := range node.VolumeGroups {
		if vg.Selector != nil && !vg.Shared {
			fvgs = append(fvgs, filter.VolumeGroup{Name: vg.Name, Selector: vg.Selector, StaticDiscovery: vg.StaticDiscovery})
		}
	}
	byName := map[string]VolumeGroupVerdicts{}
	for _, v := range VerdictsFrom(filter.Run(filter.Input{Inventory: inv, Report: report, Scoped: s.opts.Runner.DevicesFile != "",
		VolumeGroups: fvgs, MinSize: s.opts.MinDeviceSize})) {
		byName[v.Name] = v
	}
	for _, vg := range node.VolumeGroups {
		switch {
		case vg.Shared:
			out = append(out, VolumeGroupVerdicts{Name: vg.Name, Shared: true})
		case vg.Selector == nil:
			out = append(out, VolumeGroupVerdicts{Name: vg.Name, SelectorError: vg.SelectorError})
		default:
			out = append(out, byName[vg.Name])
		}
	}
	return out, nil
}

func clip(b []byte) string {
	if len(b) > maxEmbeddedOutput {
		return string(b[:maxEmbeddedOutput]) + "..."
	}
	return string(b)
}
