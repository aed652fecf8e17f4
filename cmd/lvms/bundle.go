package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"golang.org/x/term"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/utils/clock"

	"github.com/lvms-dev/lvms/diagnostics/analyze"
	"github.com/lvms-dev/lvms/diagnostics/bundle"
	"github.com/lvms-dev/lvms/diagnostics/collect"
	"github.com/lvms-dev/lvms/diagnostics/diff"
	"github.com/lvms-dev/lvms/nodeagent/diagnostics"
	"github.com/lvms-dev/lvms/words"
)

// bundleOptions are the flags of `lvms bundle` (and, with other defaults, `lvms gather`).
type bundleOptions struct {
	kubeconfig, context string
	output              string
	namespaces          []string
	since               time.Duration
	sinceTime           string
	timeout             time.Duration
	maxSize             string
	logLimit            string
	noLogs, noAgents    bool
	agentAccess         string
	agentSA             string
	agentTokenFile      string
	// clock is the one clock of a collection: --since, the bundle's name and times, the elapsed time
	// (nil: the real one).
	clock clock.Clock
}

func (o *bundleOptions) now() time.Time {
	if o.clock == nil {
		o.clock = clock.RealClock{}
	}
	return o.clock.Now()
}

func (o *bundleOptions) addCollectionFlags(cmd *cobra.Command) {
	f := cmd.Flags()
	f.StringVar(&o.kubeconfig, "kubeconfig", "", kubeconfigUsage)
	f.StringVar(&o.context, "context", "", "kubeconfig context (default: the current context)")
	f.StringSliceVarP(&o.namespaces, "namespace", "n", nil, "LVMS namespaces to collect pods and logs from (default: every namespace holding LVMS objects or node agents)")
	f.DurationVar(&o.since, "since", 0, "only logs and events newer than this, for example 2h (default: everything the cluster still has)")
	f.StringVar(&o.sinceTime, "since-time", "", "only logs and events after this RFC3339 time (overrides --since)")
	f.DurationVar(&o.timeout, "timeout", collect.DefaultTimeout, "stop collecting after this long; what was collected is kept")
	f.StringVar(&o.maxSize, "max-size", resource.NewQuantity(collect.DefaultMaxBytes, resource.BinarySI).String(),
		"bound on the collected data (uncompressed); files past it are left out and the bundle says so (a larger bundle is read with LVMS_BUNDLE_MAX_SIZE set)")
	f.StringVar(&o.logLimit, "log-limit-bytes", "16Mi", "bound on each container log")
	f.BoolVar(&o.noLogs, "no-logs", false, "do not collect pod logs")
	f.BoolVar(&o.noAgents, "no-agent-views", false, "do not collect the node agents' own views (lsblk, LVM report, lvmd.yaml, device verdicts)")
	f.StringVar(&o.agentAccess, "agent-access", o.agentAccess, "reach the node agents through the API server (proxy) or their pod IPs (direct, from inside the cluster)")
	f.StringVar(&o.agentSA, "agent-service-account", "", "namespace/name of a service account allowed to get lvmnodes/diagnostics: a short-lived token minted for it (audience "+diagnostics.Audience+") is sent to the node agents; default lvms-bundle in the node agents' namespace. Your own token is never sent")
	f.StringVar(&o.agentTokenFile, "agent-token-file", "", "file holding the bearer token to send to the node agents")
}

// collectOptions turns the flags into collector options.
func (o *bundleOptions) collectOptions(cmd *cobra.Command) (collect.Options, error) {
	opts := collect.Options{Namespaces: o.namespaces, Timeout: o.timeout, NoLogs: o.noLogs,
		NoAgentViews: o.noAgents, AgentAccess: o.agentAccess, AgentServiceAccount: o.agentSA, Version: version, Commit: commit}
	o.now() // sets the default clock
	opts.Clock = o.clock
	if o.agentAccess != collect.AccessProxy && o.agentAccess != collect.AccessDirect {
		return opts, fmt.Errorf("--agent-access %q: use %s or %s", o.agentAccess, collect.AccessProxy, collect.AccessDirect)
	}
	var err error
	if opts.MaxBytes, err = quantity("--max-size", o.maxSize); err != nil {
		return opts, err
	}
	if opts.LogLimitBytes, err = quantity("--log-limit-bytes", o.logLimit); err != nil {
		return opts, err
	}
	switch {
	case o.sinceTime != "":
		if opts.Since, err = time.Parse(time.RFC3339, o.sinceTime); err != nil {
			return opts, fmt.Errorf("--since-time %q: use an RFC3339 time such as 2026-11-22T09:00:00Z", o.sinceTime)
		}
	case o.since > 0:
		opts.Since = o.now().Add(-o.since)
	}
	if o.agentTokenFile != "" {
		b, err := os.ReadFile(o.agentTokenFile)
		if err != nil {
			return opts, fmt.Errorf("--agent-token-file: %w", err)
		}
		opts.AgentToken = strings.TrimSpace(string(b))
	}
	if opts.Config, opts.Cluster, err = kubeConfig(o.kubeconfig, o.context); err != nil {
		return opts, err
	}
	if f, ok := cmd.ErrOrStderr().(*os.File); ok && term.IsTerminal(int(f.Fd())) {
		opts.Progress = &collect.Bar{Out: f}
	}
	return opts, nil
}

func quantity(flag, s string) (int64, error) {
	q, err := resource.ParseQuantity(s)
	if err != nil || q.Sign() <= 0 {
		return 0, fmt.Errorf("%s %q: use a positive size such as 512Mi or 2Gi", flag, s)
	}
	return q.Value(), nil
}

func newBundleCommand() *cobra.Command {
	o := &bundleOptions{agentAccess: collect.AccessProxy}
	cmd := &cobra.Command{
		Use: "bundle [FILE]",
		Example: `  lvms bundle
  lvms bundle -n openshift-storage --since 2h /tmp/lvms.tar.gz
  lvms bundle --no-logs --no-agent-views --output-file /tmp/lvms.tar.gz`,
		Short: "Collect a support bundle (must-gather compatible)",
		Long: `Collect a support bundle from the cluster into a .tar.gz: every LVMS object (both API versions),
LogicalVolumes, the PersistentVolumes, claims and capacities of LVMS's drivers, StorageClasses,
VolumeSnapshotClasses, CSIDrivers, CSINodes, Nodes, events, the operator's and node agents' pods with their
logs (current and previous), and each node agent's own view of its node (lsblk, LVM report, lvmd.yaml,
device verdicts) from its authenticated diagnostics endpoint. The layout is oc adm inspect's; README.md
("Diagnostics") documents it.

Secrets are never read; tokens, kubeconfig credentials and passwords are redacted everywhere, and the bundle
lists what was redacted (redactions.json). A collector that fails is recorded in manifest.json and the
others go on. Read the bundle with 'lvms analyze FILE', 'lvms console --bundle FILE' or 'lvms tui --bundle FILE'.`,
		Args: optionalArg,
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(args) == 1 {
				if o.output != "" && o.output != args[0] {
					return fmt.Errorf("the bundle file is named twice (%s and --output-file %s): give one", args[0], o.output)
				}
				o.output = args[0]
			}
			return o.run(cmd)
		},
	}
	o.addCollectionFlags(cmd)
	cmd.Flags().StringVar(&o.output, "output-file", "", "bundle file to write, also given as the argument FILE (default: lvms-bundle-<cluster>-<UTC time>.tar.gz here); never overwritten")
	// -o is a format in every other command; the file it named here keeps working, with a warning.
	cmd.Flags().StringVarP(&o.output, "output", "o", "", "the bundle file (deprecated: use FILE or --output-file)")
	_ = cmd.Flags().MarkDeprecated("output", "-o/--output is a format in lvms; name the file as the argument or with --output-file")
	cmd.AddCommand(newBundleDiffCommand(), newBundleExtractCommand(), newBundleServeCommand())
	return cmd
}

var unsafeName = regexp.MustCompile(`[^A-Za-z0-9._-]+`)

func (o *bundleOptions) run(cmd *cobra.Command) error {
	opts, err := o.collectOptions(cmd)
	if err != nil {
		return err
	}
	start := o.now()
	out := o.output
	if out == "" {
		out = fmt.Sprintf("lvms-bundle-%s-%s.tar.gz", strings.Trim(unsafeName.ReplaceAllString(opts.Cluster, "-"), "-"), start.UTC().Format("20060102T150405Z"))
	}
	if _, err := os.Stat(out); err == nil {
		return fmt.Errorf("%s exists: name another file", out)
	}
	tmp, err := os.CreateTemp(filepath.Dir(out), ".lvms-bundle-*.tmp")
	if err != nil {
		return fmt.Errorf("create the bundle file next to %s: %w", out, err)
	}
	defer func() { _ = os.Remove(tmp.Name()) }()
	fmt.Fprintf(cmd.ErrOrStderr(), "Collecting a support bundle from %s ...\n", opts.Cluster)
	sum, err := collect.WriteTarGz(cmd.Context(), opts, tmp)
	if cerr := tmp.Close(); err == nil && cerr != nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("collect the bundle: %w", err)
	}
	if err := os.Link(tmp.Name(), out); err != nil {
		return fmt.Errorf("write %s: %w", out, err)
	}
	st, _ := os.Stat(out)
	return printSummary(cmd.OutOrStdout(), out, st.Size(), sum, o.clock.Since(start))
}

// printSummary says what was written, what failed and what the analyzers found.
func printSummary(w io.Writer, where string, size int64, sum *collect.Summary, took time.Duration) error {
	m := sum.Manifest
	var b strings.Builder
	fmt.Fprintf(&b, "Wrote %s: %s compressed, %s collected, %d collectors, %s.\n", where, human(size), human(sum.Bytes), len(m.Collectors), took.Round(time.Millisecond))
	if failed := m.Failed(); len(failed) > 0 {
		fmt.Fprintf(&b, "%d collectors failed (recorded in manifest.json; the rest of the bundle is complete):\n", len(failed))
		for i, c := range failed {
			if i == 10 {
				fmt.Fprintf(&b, "  ... and %d more\n", len(failed)-10)
				break
			}
			fmt.Fprintf(&b, "  %s: %s\n", c.Name, c.Error)
		}
	}
	if m.SizeLimitReached {
		fmt.Fprintf(&b, "The size limit (--max-size) was reached: some files were left out.\n")
	}
	if m.TimedOut {
		fmt.Fprintf(&b, "Collection stopped at --timeout %s: later collectors did not run.\n", m.Options.Timeout)
	}
	fmt.Fprintf(&b, "Redacted %s (see redactions.json).\n", words.Count(sum.Redactions.Total, "value", "values"))
	s := analyze.Summarize(sum.Findings)
	fmt.Fprintf(&b, "Findings: %d fail, %d warn, %d pass. Read them with: lvms analyze %s\n", s.Fail, s.Warn, s.Pass, where)
	_, err := io.WriteString(w, b.String())
	return err
}

func human(n int64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	div, exp := int64(unit), 0
	for m := n / unit; m >= unit; m /= unit {
		div *= unit
		exp++
	}
	return fmt.Sprintf("%.1f %ciB", float64(n)/float64(div), "KMGTPE"[exp])
}

// diffOptions are the flags of `lvms bundle diff`.
type diffOptions struct{ output string }

func newBundleDiffCommand() *cobra.Command {
	o := &diffOptions{}
	cmd := &cobra.Command{
		Use: "diff A B",
		Example: `  lvms bundle diff before.tar.gz after.tar.gz
  lvms bundle diff -o json before.tar.gz after.tar.gz`,
		Short: "Show what changed between two support bundles",
		Long: `Show what changed from bundle A to bundle B: the analyzers' findings that appeared or went away, node
states, device states as the node statuses report them, the node agents' own device verdicts, and API
objects added, removed or changed (field by field, without bookkeeping fields).`,
		Args: exactArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			a, err := bundle.Load(args[0], bundle.Limits{})
			if err != nil {
				return err
			}
			b, err := bundle.Load(args[1], bundle.Limits{})
			if err != nil {
				return err
			}
			r := diff.Compare(a, b)
			if o.output == "json" {
				enc := json.NewEncoder(cmd.OutOrStdout())
				enc.SetIndent("", "  ")
				return enc.Encode(r)
			}
			return r.WriteText(cmd.OutOrStdout())
		},
	}
	addOutputFlag(cmd.Flags(), &o.output, "text", "json")
	return cmd
}

func newBundleExtractCommand() *cobra.Command {
	return &cobra.Command{
		Use:     "extract FILE DIR",
		Example: `  lvms bundle extract lvms-bundle.tar.gz ./bundle`,
		Short:   "Unpack a support bundle into a new directory, safely",
		Long: `Unpack a support bundle into DIR, which must not exist or be empty. The whole bundle is checked first:
an entry with an absolute path, a "..", a link or a device, or one over the size limits, stops the
extraction before anything is written.`,
		Args: exactArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			names, err := bundle.Extract(args[0], args[1], bundle.Limits{})
			if err != nil {
				if errors.Is(err, bundle.ErrUnsafeEntry) {
					return fmt.Errorf("%w: nothing was written", err)
				}
				return err
			}
			_, err = fmt.Fprintf(cmd.OutOrStdout(), "Extracted %d files into %s\n", len(names), args[1])
			return err
		},
	}
}
