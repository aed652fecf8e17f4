package bundle

import (
	"fmt"
	"path"
	"strings"
	"time"

	"github.com/lvms-dev/lvms/console"
)

// FormatVersion is the bundle format this lvms writes and the newest it reads.
const FormatVersion = 1

// Product is the first line of the version file.
const Product = "lvms"

// Files at the top of a bundle.
const (
	// FileVersion is must-gather's version file: the product on line 1, its version on line 2.
	FileVersion = "version"
	// FileManifest says what was collected, when, how, and what failed.
	FileManifest = "manifest.json"
	// FileRedactions is the redaction report (redact.Report).
	FileRedactions = "redactions.json"
	// FileAnalysis holds the analyzers' findings at collection time.
	FileAnalysis = "analysis.json"
)

// Top-level directories.
const (
	DirClusterScoped = "cluster-scoped-resources"
	DirNamespaces    = "namespaces"
	DirNodes         = "nodes"
)

// Files of a node directory (nodes/<node>/), from the node agent's diagnostics view.
const (
	NodeLsblk      = "lsblk.json"
	NodeFullReport = "lvm-fullreport.json"
	NodeLVMD       = "lvmd.yaml"
	NodeVerdicts   = "device-verdicts.json"
	// NodeAgent holds the rest of the view (version, agent time, lvmd.yaml path and validity, section
	// errors) and when the collector fetched it.
	NodeAgent = "agent.json"
)

// coreGroup is how the layout names the core API group, as `oc adm inspect` does.
const coreGroup = "core"

// safeSegment reports whether s can be one path segment: not empty, no slash, not . or .., no NUL.
func safeSegment(s string) bool {
	return s != "" && s != "." && s != ".." && !strings.ContainsAny(s, "/\\\x00")
}

func join(segments ...string) (string, error) {
	for _, s := range segments {
		if !safeSegment(s) {
			return "", fmt.Errorf("%q cannot be part of a bundle path", s)
		}
	}
	return path.Join(segments...), nil
}

// ObjectPath is where an object lives: cluster-scoped-resources/<group>/<resource>/<name>.yaml, or
// namespaces/<namespace>/<group>/<resource>/<name>.yaml; the core group is "core".
func ObjectPath(group, resource, namespace, name string) (string, error) {
	if group == "" {
		group = coreGroup
	}
	if namespace == "" {
		return join(DirClusterScoped, group, resource, name+".yaml")
	}
	return join(DirNamespaces, namespace, group, resource, name+".yaml")
}

// EventsPath is the list of events of a namespace: namespaces/<namespace>/core/events.yaml.
func EventsPath(namespace string) (string, error) {
	return join(DirNamespaces, namespace, coreGroup, "events.yaml")
}

// LogPath is a container's log: namespaces/<ns>/pods/<pod>/<container>/<container>/logs/current.log (or
// previous.log), as `oc adm inspect` lays them out.
func LogPath(namespace, pod, container string, previous bool) (string, error) {
	file := "current.log"
	if previous {
		file = "previous.log"
	}
	return join(DirNamespaces, namespace, "pods", pod, container, container, "logs", file)
}

// NodePath is a file of a node's directory: nodes/<node>/<file>.
func NodePath(node, file string) (string, error) { return join(DirNodes, node, file) }

// Manifest says what a bundle holds and how it was collected.
type Manifest struct {
	// Format is the bundle format (FormatVersion when written).
	Format int `json:"format"`
	// Product and Version of the lvms that wrote it; Commit of its build.
	Product string `json:"product"`
	Version string `json:"version"`
	Commit  string `json:"commit,omitempty"`
	// Started and Finished bound the collection; Started is "the bundle's time".
	Started  time.Time `json:"started"`
	Finished time.Time `json:"finished"`
	// Cluster is the kubeconfig context or server; Server the API server URL; User who collected.
	Cluster string `json:"cluster,omitempty"`
	Server  string `json:"server,omitempty"`
	User    string `json:"user,omitempty"`
	// ServerVersion is the API server's version (gitVersion).
	ServerVersion string `json:"serverVersion,omitempty"`
	// ServerClockOffset is the API server's clock minus the collector's (from the Date header, to the
	// second), so node clocks can be compared with the control plane's; nil when unknown.
	ServerClockOffset *time.Duration `json:"serverClockOffsetNanos,omitempty"`
	// Installed is true when the cluster serves an LVMS API.
	Installed bool `json:"installed"`
	// Namespaces whose LVMS objects, pods and logs were collected.
	Namespaces []string `json:"namespaces"`
	// Options the collection ran with.
	Options Options `json:"options"`
	// Collectors in the order they ran, each with its outcome.
	Collectors []CollectorRun `json:"collectors"`
	// Hidden lists the kinds the bundle could not hold (not served by the cluster, or forbidden).
	Hidden []console.HiddenKind `json:"hidden,omitempty"`
	// SizeLimitReached is true when files were left out because the bundle reached Options.MaxBytes.
	SizeLimitReached bool `json:"sizeLimitReached,omitempty"`
	// TimedOut is true when collection stopped at Options.Timeout.
	TimedOut bool `json:"timedOut,omitempty"`
}

// Options are the collection settings recorded in the manifest.
type Options struct {
	// Since bounds logs and events: only newer ones were collected (zero: no bound).
	Since time.Time `json:"since,omitzero"`
	// MaxBytes bounds the collected data (uncompressed).
	MaxBytes int64 `json:"maxBytes"`
	// Timeout bounds the whole collection.
	Timeout string `json:"timeout"`
	// LogLimitBytes bounds each container log.
	LogLimitBytes int64 `json:"logLimitBytes"`
	// Logs and AgentViews say whether those collectors ran.
	Logs       bool `json:"logs"`
	AgentViews bool `json:"agentViews"`
	// AgentAccess is how node agents were reached: "proxy" (API server pods/proxy) or "direct".
	AgentAccess string `json:"agentAccess,omitempty"`
}

// CollectorRun is one collector's outcome.
type CollectorRun struct {
	Name     string        `json:"name"`
	Duration time.Duration `json:"durationNanos"`
	Files    int           `json:"files"`
	Bytes    int64         `json:"bytes"`
	// Error says why the collector failed or stopped early; what it wrote before is kept.
	Error string `json:"error,omitempty"`
	// Skipped files, for example past the size limit.
	Skipped int `json:"skipped,omitempty"`
}

// Failed lists the collectors that reported an error.
func (m *Manifest) Failed() []CollectorRun {
	var out []CollectorRun
	for _, c := range m.Collectors {
		if c.Error != "" {
			out = append(out, c)
		}
	}
	return out
}

// VersionFile is the content of the version file for version.
func VersionFile(version string) []byte { return []byte(Product + "\n" + version + "\n") }
