package console

import (
	"cmp"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/api/resource"

	lvmv2 "github.com/lvms-dev/lvms/api/lvm/v2alpha1"
	"github.com/lvms-dev/lvms/console/explain"
)

// desiredVG is a volume group as a spec asks for it, from either API version.
type desiredVG struct {
	name string
	// selector describes the device selector in one line.
	selector string
	// named are the devices the selector names explicitly; optional ones may be absent.
	named []namedDevice
	// exhaustive is true when only named devices can be selected, so any other PV is unexpected.
	exhaustive bool
	// kernelNamesOnly is true when the actual side is the v1alpha1 node status: it reports devices by kernel
	// name only and does not report thin pools.
	kernelNamesOnly bool
	accessPolicy    string
	forceWipe       bool
	pools           []string
}

type namedDevice struct {
	path     string
	optional bool
}

// actualVG is a volume group as a node agent reports it, from either API version.
type actualVG struct {
	name     string
	state    string
	message  string
	size     *resource.Quantity
	free     *resource.Quantity
	included []actualDevice
	excluded []excludedDevice
	volumes  []lvmv2.LogicalVolumeStatus
	// lockspace and initializedBy are set on shared volume groups (v2alpha1 only).
	lockspace, initializedBy string
}

type actualDevice struct {
	kname, path string
	term        int32
	links       []string
	size        *resource.Quantity
	wiped       *time.Time
}

type excludedDevice struct {
	kname, path string
	links       []string
	size        *resource.Quantity // nil when not reported (v1, or not on the node)
	reasons     []string
	codes       []string
}

// buildVG compares a desired and an actual volume group (either may be nil) on one node. brief leaves out
// the explanations of rows that do not differ (their severity is kept): the overview only counts those.
func buildVG(node string, src Ref, d *desiredVG, a *actualVG, brief bool) VolumeGroupView {
	v := VolumeGroupView{Source: src, InSpec: d != nil, Reported: a != nil, Health: HealthOK}
	if d != nil {
		v.Name, v.Desired, v.AccessPolicy, v.ForceWipe = d.name, d.selector, d.accessPolicy, d.forceWipe
	} else {
		d = &desiredVG{name: a.name}
		v.Name, v.Desired = a.name, "not in spec"
	}
	ctx := explain.Context{Node: node, VolumeGroup: v.Name}
	if a == nil {
		v.State = stateNotReported
		v.Differs, v.Health = true, HealthError
		t := explain.Topic(explain.TopicVolumeGroupNotReported, "", ctx)
		v.Topic = &t
		a = &actualVG{name: d.name}
	} else {
		v.State, v.Message = a.state, a.message
		v.Lockspace, v.InitializedBy = a.lockspace, a.initializedBy
		v.Size, v.Free = bytesOf(a.size), bytesOf(a.free)
		v.Health = stateHealth(a.state)
		// The volume group's own finding is as alarming as its state (Degraded a warning, Failed an error),
		// and one that is not in the spec at least a warning.
		if !v.InSpec {
			v.Differs, v.Health = true, worse(v.Health, HealthWarning)
			t := explain.Topic(explain.TopicUnexpectedVolumeGroup, "", ctx)
			t.Severity = severityOf(v.Health)
			v.Topic = &t
		} else if h := stateHealth(a.state); h.Rank() >= HealthWarning.Rank() {
			v.Differs = true
			detail := ""
			if a.message != "" {
				detail = "The agent says: \"" + a.message + "\"."
			}
			t := explain.Topic(unhealthyTopic(a), detail, ctx)
			t.Severity = severityOf(h)
			v.Topic = &t
		}
	}
	v.Devices, v.counts = deviceRows(node, d, a, brief)
	for _, r := range v.Devices {
		if r.Differs {
			v.Differs = true
			v.Health = worse(v.Health, r.Health)
		}
	}
	v.Pools = thinPools(node, d, a)
	for _, p := range v.Pools {
		v.Health = worse(v.Health, p.Health)
		if len(p.Findings) > 0 {
			v.Differs = true
		}
	}
	if slices.ContainsFunc(v.Devices, func(r DeviceRow) bool { return r.State == DeviceUnresolved }) {
		v.Notes = append(v.Notes, "The selector names /dev/disk/ links, and the status lists some devices by kernel name (/dev/sdb) "+
			"only, so the console cannot tell which device a link is: those links are shown as unresolved, not as missing.")
	}
	return v
}

// deviceRows lists every device of a volume group: the ones in it, the excluded ones and the named ones the
// agent does not report; the ones that differ first, then by name.
//
// Devices are matched to the selector's paths by kernel name, or by the path the agent says it matched.
// Excluded devices (and every v1alpha1 device) carry a kernel name only, so a selector path that is a
// /dev/disk/ link may name one of them without the console being able to tell which: when such links and
// such devices are both left over, neither is called missing or unexpected; the links are "unresolved".
func deviceRows(node string, d *desiredVG, a *actualVG, brief bool) ([]DeviceRow, deviceCounts) {
	// A named disk is found by the kernel name, by the path the agent matched, or by one of the device's
	// stable links the agent reports.
	find := func(kname, path string, links []string) (namedDevice, bool) {
		for _, n := range d.named {
			if n.path == kname || (path != "" && n.path == path) || slices.Contains(links, n.path) {
				return n, true
			}
		}
		return namedDevice{}, false
	}
	seen := map[string]bool{}
	leftover := 0
	// Only a device without reported links can hide a named link: with links, a name it lacks is not its.
	for _, dev := range a.included {
		if n, ok := find(dev.kname, dev.path, dev.links); ok {
			seen[n.path] = true
		} else if len(dev.links) == 0 {
			leftover++
		}
	}
	for _, ex := range a.excluded {
		if n, ok := find(ex.kname, ex.path, ex.links); ok {
			seen[n.path] = true
		} else if len(ex.links) == 0 && !strings.HasPrefix(ex.kname, "/dev/disk/") {
			leftover++
		}
	}
	var links []string
	for _, n := range d.named {
		if !seen[n.path] && isLink(n.path) {
			links = append(links, n.path)
		}
	}
	ambiguous := len(links) > 0 && leftover > 0
	const maybeNamed = "candidate (maybe one of the selector's links)"

	// A brief row that does not differ is only counted: thousands of nodes' overview need no more.
	var rows []DeviceRow
	if !brief {
		rows = make([]DeviceRow, 0, len(a.included)+len(a.excluded)+len(d.named))
	}
	var counts deviceCounts
	keep := func(r DeviceRow) {
		counts.add(r.State)
		if !brief || r.Differs || r.State == DeviceUnresolved {
			rows = append(rows, r)
		}
	}
	inVG := "physical volume of " + a.name
	var size *Bytes // shared by the rows of devices of the same size (views are read-only)
	for _, dev := range a.included {
		ctx := explain.Context{Node: node, Device: dev.kname, VolumeGroup: a.name}
		if dev.size == nil {
			size = nil
		} else if size == nil || size.Value != dev.size.Value() {
			size = bytesOf(dev.size)
		}
		r := DeviceRow{KName: dev.kname, Path: dev.path, State: DeviceInVG, Actual: inVG,
			Size: size, Health: HealthOK}
		if dev.wiped != nil {
			r.State, r.Wiped = DeviceWiped, dev.wiped
			r.Actual += ", wiped by LVMS on " + dev.wiped.UTC().Format(time.RFC3339)
		}
		switch n, ok := find(dev.kname, dev.path, dev.links); {
		case ok:
			r.Desired = namedText(n)
			if n.path != dev.kname {
				r.Path = n.path
			}
		case ambiguous:
			r.Desired = maybeNamed
		case d.exhaustive:
			r.State, r.Desired, r.Differs, r.Health = DeviceUnexpected, "not in spec", true, HealthWarning
			t := explain.Topic(explain.TopicUnexpectedDevice, "", ctx)
			r.Topic = &t
		case dev.term > 0:
			r.Desired = fmt.Sprintf("matched by selector term %d", dev.term)
		default:
			r.Desired = "matched by selector"
		}
		keep(r)
	}
	for _, ex := range a.excluded {
		r := DeviceRow{KName: ex.kname, State: DeviceExcluded, Health: HealthInfo}
		if ex.size != nil {
			r.Size = bytesOf(ex.size)
		}
		if !brief {
			r.Reasons = reasonsOf(node, a.name, ex, false)
		}
		notFound := excludedHealth(&r, ex)
		if notFound {
			r.State = DeviceMissing
		}
		n, named := find(ex.kname, ex.path, ex.links)
		if named && n.path != ex.kname {
			r.Path = n.path
		}
		switch {
		case named && n.optional:
			r.Desired = namedText(n)
			r.Health = HealthInfo
		case named:
			r.Desired, r.Differs = namedText(n), true
			r.Health = worse(r.Health, HealthWarning)
			if notFound {
				r.Health = HealthError
			}
		case ambiguous:
			r.Desired = maybeNamed
		case d.exhaustive:
			r.Desired = "not named"
		default:
			r.Desired = "candidate"
		}
		if brief && r.Differs {
			r.Reasons = reasonsOf(node, a.name, ex, false) // a difference carries its explanation
		}
		if !brief || r.Differs {
			r.Actual = excludedText(r.Reasons)
		}
		keep(r)
	}
	for _, n := range d.named {
		if seen[n.path] {
			continue
		}
		r := DeviceRow{KName: n.path, State: DeviceMissing, Desired: namedText(n), Actual: "not reported"}
		switch {
		case ambiguous && isLink(n.path):
			r.State, r.Health = DeviceUnresolved, HealthInfo
			r.Actual = "not resolved: the status names devices by kernel name only"
		case n.optional:
			r.Health = HealthInfo
		case a.lockspace != "" || strings.EqualFold(d.accessPolicy, string(lvmv2.AccessPolicyShared)):
			r.State, r.Health, r.Actual = sharedLUNRow(a, n.path)
		default:
			// Not reported is not yet known missing (the status may be stale): as alarming as its explanation.
			t := explain.Topic(explain.TopicDeviceNotReported, "", explain.Context{Node: node, Device: n.path, VolumeGroup: d.name})
			r.Differs, r.Health, r.Topic = true, healthOf(t.Severity), &t
		}
		keep(r)
	}
	slices.SortStableFunc(rows, func(x, y DeviceRow) int {
		if x.Differs != y.Differs {
			if x.Differs {
				return -1
			}
			return 1
		}
		return strings.Compare(x.KName, y.KName)
	})
	return rows, counts
}

// deviceCounts are a volume group's devices by what they are to it, brief rows included.
type deviceCounts struct{ inUse, excluded, missing int }

func (c *deviceCounts) add(s DeviceState) {
	switch s {
	case DeviceInVG, DeviceWiped, DeviceUnexpected:
		c.inUse++
	case DeviceExcluded:
		c.excluded++
	case DeviceMissing:
		c.missing++
	}
}

// isLink reports whether a selector path is a udev link (/dev/disk/by-id/..., by-path, ...) rather than a
// kernel name.
func isLink(p string) bool { return strings.HasPrefix(p, "/dev/disk/") }

func namedText(n namedDevice) string {
	if n.optional {
		return "optional path"
	}
	return "named in selector"
}

// excludedHealth folds an excluded device's reasons into its row's health (by code: no text is built, which
// a brief row of one of thousands of devices skips) and reports whether the device was not found.
func excludedHealth(r *DeviceRow, ex excludedDevice) (notFound bool) {
	for i := range max(len(ex.reasons), len(ex.codes)) {
		code := "Unknown"
		if i < len(ex.codes) && ex.codes[i] != "" {
			code = ex.codes[i]
		}
		r.Health = worse(r.Health, healthOf(explain.ReasonSeverity(code)))
		notFound = notFound || code == string(lvmv2.ReasonNotFound)
	}
	return notFound
}

// excludedText is an excluded row's actual state: its reason codes.
func excludedText(reasons []Reason) string {
	codes := make([]string, 0, len(reasons))
	for _, rs := range reasons {
		codes = append(codes, rs.Code)
	}
	return "excluded: " + strings.Join(codes, ", ")
}

// reasonsOf pairs the agent's sentences with their codes and explanations. Codes and sentences are in the
// same order; a missing code (an older agent) is shown as "Unknown" with its sentence. brief explanations
// carry the code and severity only.
func reasonsOf(node, vg string, ex excludedDevice, brief bool) []Reason {
	n := max(len(ex.reasons), len(ex.codes))
	out := make([]Reason, 0, n)
	for i := range n {
		var code, sentence string
		if i < len(ex.codes) {
			code = ex.codes[i]
		}
		if i < len(ex.reasons) {
			sentence = ex.reasons[i]
		}
		if code == "" {
			code = "Unknown"
		}
		if brief {
			out = append(out, Reason{Code: code, Sentence: sentence, Explanation: explain.Explanation{Code: code, Severity: explain.ReasonSeverity(code)}})
			continue
		}
		ctx := explain.Context{Node: node, Device: ex.kname, VolumeGroup: vg, Sentence: sentence}
		out = append(out, Reason{Code: code, Sentence: sentence, Explanation: explain.Reason(code, ctx)})
	}
	return out
}

// thinPools pairs desired pool names with the volumes the agent reports; usage over the thresholds becomes
// a finding.
func thinPools(node string, d *desiredVG, a *actualVG) []ThinPool {
	var out []ThinPool
	seen := map[string]bool{}
	for _, v := range a.volumes {
		isPool := strings.HasPrefix(v.Attributes, "t") || slices.Contains(d.pools, v.Name) || v.MetadataPercent != ""
		if !isPool {
			continue
		}
		seen[v.Name] = true
		p := ThinPool{Name: v.Name, Size: bytesOf(v.Size), Attributes: v.Attributes, Reported: true, Health: HealthOK,
			DataPercent: percent(v.DataPercent), MetadataPercent: percent(v.MetadataPercent),
			DataThreshold:     explain.ThinThreshold("data", float64(v.DataUsageThreshold)),
			MetadataThreshold: explain.ThinThreshold("metadata", float64(v.MetadataUsageThreshold))}
		ctx := explain.Context{Node: node, VolumeGroup: a.name}
		for _, u := range []struct {
			kind      string
			pct       *float64
			threshold float64
		}{{"metadata", p.MetadataPercent, p.MetadataThreshold}, {"data", p.DataPercent, p.DataThreshold}} {
			if u.pct == nil {
				continue
			}
			if x, ok := explain.ThinUsageAt(u.kind, *u.pct, u.threshold, ctx); ok {
				f := Difference{Node: node, VolumeGroup: a.name, Desired: "below " + strconv.FormatFloat(u.threshold, 'f', -1, 64) + "% " + u.kind + " (at it no new volume is placed on the pool)",
					Actual: strconv.FormatFloat(*u.pct, 'f', 1, 64) + "% " + u.kind + " used in " + v.Name, Explanation: x, Health: healthOf(x.Severity)}
				p.Findings = append(p.Findings, f)
				p.Health = worse(p.Health, f.Health)
			}
		}
		out = append(out, p)
	}
	for _, name := range d.pools {
		if seen[name] || a.state == "" || d.kernelNamesOnly {
			continue
		}
		x := explain.Topic(explain.TopicThinPoolNotReported, "", explain.Context{Node: node, VolumeGroup: a.name})
		out = append(out, ThinPool{Name: name, Health: HealthWarning, Findings: []Difference{{Node: node, VolumeGroup: a.name,
			Desired: "thin pool " + name, Actual: "not reported", Explanation: x, Health: HealthWarning}}})
	}
	slices.SortFunc(out, func(x, y ThinPool) int { return cmp.Compare(x.Name, y.Name) })
	return out
}

// percent parses "30.0" (lvs output); nil when empty or not a number.
func percent(s string) *float64 {
	if s == "" {
		return nil
	}
	f, err := strconv.ParseFloat(strings.TrimSuffix(strings.TrimSpace(s), "%"), 64)
	if err != nil || f < 0 {
		return nil
	}
	return &f
}

// stateNotReported is the state of what a node's agent has not reported (yet).
const stateNotReported = "Not reported"

// stateHealth maps the states of sets, nodes, volume groups and classes (both API versions) to a health.
func stateHealth(state string) Health {
	switch state {
	case "Ready", "Healthy", "Exists":
		return HealthOK
	case "Progressing", "Deleting":
		return HealthInfo
	case "Degraded":
		return HealthWarning
	case "Failed", "Missing", "Conflict":
		return HealthError
	}
	return HealthUnknown
}
