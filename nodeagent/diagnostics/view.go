package diagnostics

import (
	"encoding/json"
	"slices"
	"strings"
	"time"

	"github.com/lvms-dev/lvms/nodeagent/filter"
)

// ViewAPIVersion is the version of the View document. Readers refuse a newer one with a clear message.
const ViewAPIVersion = "diagnostics.lvm.topolvm.io/v1"

// Path is the HTTP path of the view.
const Path = "/diagnostics/v1/view"

// DefaultPort is the port the node agent serves diagnostics on, and the port clients use when the agent's
// pod does not name a container port PortName.
const DefaultPort = 8443

// PortName is the name of the agent pod's container port for diagnostics.
const PortName = "diagnostics"

// Sections of a view; a section that failed is listed in View.Errors under its name.
const (
	SectionLsblk      = "lsblk"
	SectionFullReport = "fullreport"
	SectionLVMD       = "lvmd"
	SectionVerdicts   = "verdicts"
)

// View is the node agent's own view of its node at one time.
type View struct {
	APIVersion string `json:"apiVersion"`
	Node       string `json:"node"`
	// Version of the agent's lvms binary.
	Version string `json:"version"`
	// Time is the agent's clock when the view was made (clock skew shows against the collector's).
	Time time.Time `json:"time"`
	// Lsblk is `lsblk --json --bytes --paths -o <columns>` output, as printed.
	Lsblk json.RawMessage `json:"lsblk,omitempty"`
	// FullReport is `lvm fullreport --readonly --reportformat json ...` output, as printed.
	FullReport json.RawMessage `json:"fullReport,omitempty"`
	// LVMD is lvmd.yaml as the agent reads it.
	LVMD *LVMDFile `json:"lvmd,omitempty"`
	// Verdicts per desired volume group, in desired order.
	Verdicts []VolumeGroupVerdicts `json:"verdicts,omitempty"`
	// Errors lists the sections that could not be read; the others are still served.
	Errors []SectionError `json:"errors,omitempty"`
}

// LVMDFile is lvmd.yaml on the node.
type LVMDFile struct {
	Path   string `json:"path"`
	Exists bool   `json:"exists"`
	// Content is the file as read (lvmd.yaml holds no credentials).
	Content string `json:"content,omitempty"`
	// Invalid says why the file does not parse or validate; empty when it is valid.
	Invalid string `json:"invalid,omitempty"`
}

// SectionError is one section the agent could not read.
type SectionError struct {
	Section string `json:"section"`
	Error   string `json:"error"`
}

// VolumeGroupVerdicts is the filter pipeline's outcome for one desired volume group.
type VolumeGroupVerdicts struct {
	Name string `json:"name"`
	// Exists is true when LVM reports the volume group (tagged as ours).
	Exists bool `json:"exists"`
	// SelectorError says why the volume group's selector cannot be used (no verdicts then).
	SelectorError string `json:"selectorError,omitempty"`
	// Shared volume groups are handled by the shared path and not filtered here.
	Shared bool `json:"shared,omitempty"`
	// Devices: members and new devices first, then excluded ones, each by kernel name.
	Devices []DeviceVerdict `json:"devices,omitempty"`
	// MissingRequired are v1 paths that do not resolve.
	MissingRequired []string `json:"missingRequired,omitempty"`
	// NoOptionalFound: the selector has optionalPaths and none resolves.
	NoOptionalFound bool `json:"noOptionalFound,omitempty"`
}

// Verdicts of a device.
const (
	VerdictMember   = "member"   // a physical volume of the volume group
	VerdictNew      = "new"      // passes every filter, will be added
	VerdictExcluded = "excluded" // rejected, with reasons
)

// DeviceVerdict is the verdict for one device of one volume group.
type DeviceVerdict struct {
	// KName is the device's kernel name, or the selector's path when it was not found.
	KName   string `json:"kname"`
	Verdict string `json:"verdict"`
	// Selected is false for a member the selector no longer picks.
	Selected bool     `json:"selected"`
	Reasons  []Reason `json:"reasons,omitempty"`
}

// Reason is one filter's reason to exclude a device.
type Reason struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

// VerdictsFrom converts the filter pipeline's results to the view's form, sorted by kernel name within each
// verdict.
func VerdictsFrom(results []filter.Result) []VolumeGroupVerdicts {
	out := make([]VolumeGroupVerdicts, 0, len(results))
	for _, r := range results {
		v := VolumeGroupVerdicts{Name: r.Name, Exists: r.Exists, MissingRequired: slices.Clone(r.MissingRequired),
			NoOptionalFound: r.NoOptionalFound}
		for _, c := range r.Members {
			v.Devices = append(v.Devices, DeviceVerdict{KName: c.KName(), Verdict: VerdictMember, Selected: c.Selected})
		}
		for _, c := range r.New {
			v.Devices = append(v.Devices, DeviceVerdict{KName: c.KName(), Verdict: VerdictNew, Selected: true})
		}
		for _, e := range r.Excluded {
			d := DeviceVerdict{KName: e.KName, Verdict: VerdictExcluded, Selected: e.Match != nil && e.Match.Selected}
			for _, reason := range e.Reasons {
				d.Reasons = append(d.Reasons, Reason{Code: string(reason.Code), Message: reason.Message})
			}
			v.Devices = append(v.Devices, d)
		}
		slices.SortStableFunc(v.Devices, func(a, b DeviceVerdict) int {
			if ra, rb := verdictRank(a.Verdict), verdictRank(b.Verdict); ra != rb {
				return ra - rb
			}
			return strings.Compare(a.KName, b.KName)
		})
		out = append(out, v)
	}
	return out
}

func verdictRank(v string) int {
	switch v {
	case VerdictMember:
		return 0
	case VerdictNew:
		return 1
	}
	return 2
}
