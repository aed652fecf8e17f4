package analyze

import (
	"cmp"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/lvms-dev/lvms/console/explain"
	"github.com/lvms-dev/lvms/diagnostics/bundle"
)

// Severity of a finding, as troubleshoot.sh analyzers report it.
type Severity string

// Severities.
const (
	Pass Severity = "pass"
	Warn Severity = "warn"
	Fail Severity = "fail"
)

// Rank orders severities: fail highest.
func (s Severity) Rank() int {
	switch s {
	case Fail:
		return 2
	case Warn:
		return 1
	}
	return 0
}

// severityOf maps the console's explanation severity: error is fail, warning warn, info pass.
func severityOf(s explain.Severity) Severity {
	switch s {
	case explain.Error:
		return Fail
	case explain.Warning:
		return Warn
	}
	return Pass
}

// Object names the object a finding is about.
type Object struct {
	APIVersion string `json:"apiVersion,omitempty"`
	Kind       string `json:"kind"`
	Namespace  string `json:"namespace,omitempty"`
	Name       string `json:"name"`
}

// String is "Kind namespace/name".
func (o Object) String() string {
	if o.Namespace == "" {
		return o.Kind + " " + o.Name
	}
	return o.Kind + " " + o.Namespace + "/" + o.Name
}

// Finding is one analyzer's outcome.
type Finding struct {
	// CheckName is the analyzer (see Checks).
	CheckName string   `json:"checkName"`
	Severity  Severity `json:"severity"`
	Title     string   `json:"title"`
	// Message says what is wrong (or, for pass, what was checked).
	Message string `json:"message"`
	// InvolvedObject is the object concerned, when there is one.
	InvolvedObject *Object `json:"involvedObject,omitempty"`
	// Node, VolumeGroup and Device locate storage findings.
	Node        string `json:"node,omitempty"`
	VolumeGroup string `json:"volumeGroup,omitempty"`
	Device      string `json:"device,omitempty"`
	// Codes are the reason codes or condition types behind the finding.
	Codes []string `json:"codes,omitempty"`
	// Fix says what to do next; Command, when set, is a command that helps.
	Fix     string `json:"fix"`
	Command string `json:"command,omitempty"`
	// Warning accompanies a fix that destroys data.
	Warning string `json:"warning,omitempty"`
}

// Check is one analyzer.
type Check struct {
	Name        string
	Description string
	run         func(in *input) []Finding
}

// Checks lists every analyzer, in the order they run.
func Checks() []Check {
	return []Check{
		{Name: CheckCollection, Description: "collectors that failed, and what the bundle therefore lacks", run: checkCollection},
		{Name: CheckNodeNotReady, Description: "nodes whose LVMS state is not Ready, with the cause", run: checkNodeNotReady},
		{Name: CheckRequiredPath, Description: "device paths the spec requires that do not exist on the node", run: checkRequiredPath},
		{Name: CheckAllExcluded, Description: "volume groups whose every candidate device is excluded", run: checkAllExcluded},
		{Name: CheckDeviceExcluded, Description: "each excluded device with its reason codes", run: checkDeviceExcluded},
		{Name: CheckVolumeGroupMissing, Description: "desired volume groups missing or failed on a node", run: checkVolumeGroupMissing},
		{Name: CheckLockManagers, Description: "nodes with a shared volume group whose lock managers (sanlock, lvmlockd) do not run", run: checkLockManagers},
		{Name: CheckLockspace, Description: "shared volume groups a node is not in the lockspace of", run: checkLockspace},
		{Name: CheckSharedLUN, Description: "LUNs of shared volume groups not visible on a node", run: checkSharedLUN},
		{Name: CheckHostIDConflict, Description: "sanlock host IDs reported by more than one node", run: checkHostIDConflict},
		{Name: CheckNoWatchdog, Description: "nodes whose sanlock runs without a watchdog (no fencing)", run: checkNoWatchdog},
		{Name: CheckThinPool, Description: "thin pool data (80%) or metadata (75%) usage: warn above, fail from 90%", run: checkThinPool},
		{Name: CheckAgentNotReady, Description: "selected nodes without a running, ready node agent", run: checkAgentNotReady},
		{Name: CheckDriver, Description: "the CSI driver object and its registration on each node", run: checkDriver},
		{Name: CheckPVCCapacity, Description: "claims pending because a node lacks capacity", run: checkPVCCapacity},
		{Name: CheckLogicalVolumeStuck, Description: "LogicalVolumes that fail, or are not created or deleted after five minutes", run: checkLogicalVolumeStuck},
		{Name: CheckConflictingSets, Description: "LVMNodeSets that claim the same nodes' volume groups, devices or device classes", run: checkConflictingSets},
		{Name: CheckDoubleManagement, Description: "nodes claimed by both a v1alpha1 LVMCluster and a v2alpha1 LVMNodeSet", run: checkDoubleManagement},
		{Name: CheckLVMD, Description: "lvmd.yaml on each node: present, valid, naming existing volume groups", run: checkLVMD},
		{Name: CheckSkew, Description: "clock and version skew between the operator, the node agents and the collector", run: checkSkew},
		{Name: CheckMigration, Description: "migrations left half-way: unfinished or unreadable records, LVMClusters kept or stuck deleting, sets of a removed LVMCluster", run: checkMigration},
	}
}

// Check names.
const (
	CheckCollection         = "CollectionComplete"
	CheckNodeNotReady       = "NodeNotReady"
	CheckRequiredPath       = "RequiredPathMissing"
	CheckAllExcluded        = "AllDevicesExcluded"
	CheckDeviceExcluded     = "DeviceExcluded"
	CheckVolumeGroupMissing = "VolumeGroupMissing"
	CheckLockManagers       = "LockManagersNotRunning"
	CheckLockspace          = "LockspaceNotJoined"
	CheckSharedLUN          = "SharedLUNMissing"
	CheckHostIDConflict     = "HostIDConflict"
	CheckNoWatchdog         = "NoWatchdog"
	CheckThinPool           = "ThinPoolUsage"
	CheckAgentNotReady      = "NodeAgentNotReady"
	CheckDriver             = "DriverNotRegistered"
	CheckPVCCapacity        = "PVCPendingForCapacity"
	CheckLogicalVolumeStuck = "LogicalVolumeStuck"
	CheckConflictingSets    = "ConflictingNodeSets"
	CheckDoubleManagement   = "V1V2DoubleManagement"
	CheckLVMD               = "LVMDConfigInvalid"
	CheckSkew               = "ClockOrVersionSkew"
	CheckMigration          = "MigrationIncomplete"
)

// Run runs every analyzer over b. A check that finds nothing wrong reports one pass finding saying what
// it looked at. Findings are sorted: fail, warn, pass; then by check, node, object and message.
func Run(b *bundle.Bundle) []Finding {
	in := newInput(b)
	var out []Finding
	for _, c := range Checks() {
		fs := c.run(in)
		if !slices.ContainsFunc(fs, func(f Finding) bool { return f.Severity != Pass }) {
			fs = append(fs, Finding{Severity: Pass, Title: c.Description, Message: "No problem found: " + c.Description + "."})
		}
		for i := range fs {
			fs[i].CheckName = c.Name
		}
		out = append(out, fs...)
	}
	Sort(out)
	// One finding per cause: two checks (or two objects of one node) saying the same thing word for word
	// are one line to the reader.
	return slices.CompactFunc(out, func(a, b Finding) bool {
		return a.Severity == b.Severity && a.CheckName == b.CheckName && a.Title == b.Title && a.Node == b.Node && a.Message == b.Message
	})
}

// Sort orders findings worst first, then by check, node, object, volume group, device and message.
func Sort(fs []Finding) {
	slices.SortStableFunc(fs, func(a, b Finding) int {
		if a.Severity.Rank() != b.Severity.Rank() {
			return b.Severity.Rank() - a.Severity.Rank()
		}
		return cmp.Or(strings.Compare(a.CheckName, b.CheckName), strings.Compare(a.Node, b.Node),
			strings.Compare(objString(a.InvolvedObject), objString(b.InvolvedObject)),
			strings.Compare(a.VolumeGroup, b.VolumeGroup), strings.Compare(a.Device, b.Device), strings.Compare(a.Message, b.Message))
	})
}

func objString(o *Object) string {
	if o == nil {
		return ""
	}
	return o.String()
}

// Document is analysis.json.
type Document struct {
	Format   int       `json:"format"`
	Summary  Summary   `json:"summary"`
	Findings []Finding `json:"findings"`
}

// Summary counts findings by severity.
type Summary struct {
	Pass int `json:"pass"`
	Warn int `json:"warn"`
	Fail int `json:"fail"`
}

// Summarize counts findings.
func Summarize(fs []Finding) Summary {
	var s Summary
	for _, f := range fs {
		switch f.Severity {
		case Fail:
			s.Fail++
		case Warn:
			s.Warn++
		default:
			s.Pass++
		}
	}
	return s
}

// Marshal encodes findings as analysis.json.
func Marshal(fs []Finding) ([]byte, error) {
	if fs == nil {
		fs = []Finding{}
	}
	b, err := json.MarshalIndent(Document{Format: 1, Summary: Summarize(fs), Findings: fs}, "", "  ")
	if err != nil {
		return nil, fmt.Errorf("encode the findings: %w", err)
	}
	return append(b, '\n'), nil
}

// fixOf turns an explanation's next steps into one fix, each step's command inline, and returns the first
// command on its own too.
func fixOf(x explain.Explanation) (fix, command string) {
	var parts []string
	for _, s := range x.Next {
		text := strings.TrimSpace(s.Text)
		if s.Command != "" {
			if command == "" {
				command = s.Command
			}
			switch {
			case strings.HasSuffix(text, ":"):
				text += " `" + s.Command + "`."
			case strings.HasSuffix(text, "."):
				text = strings.TrimSuffix(text, ".") + " (`" + s.Command + "`)."
			default:
				text += " (`" + s.Command + "`)"
			}
		}
		parts = append(parts, text)
	}
	return strings.Join(parts, " "), command
}

// fromExplanation fills a finding from an explanation: title, severity, message, fix.
func fromExplanation(x explain.Explanation, message string) Finding {
	fix, cmd := fixOf(x)
	if message == "" {
		message = x.Why
	}
	return Finding{Severity: severityOf(x.Severity), Title: x.Title, Message: message, Fix: fix, Command: cmd, Warning: x.Warning}
}
