package filter

import (
	"fmt"
	"slices"
	"strings"

	lvmv2 "github.com/lvms-dev/lvms/api/lvm/v2alpha1"
	"github.com/lvms-dev/lvms/nodeagent/blockdev"
	"github.com/lvms-dev/lvms/nodeagent/lvm"
	"github.com/lvms-dev/lvms/nodeagent/selector"
)

// DefaultMinSize is the smallest device LVMS makes a physical volume of.
const DefaultMinSize = 128 << 20

// VolumeGroup is one desired volume group as the filters need it.
type VolumeGroup struct {
	Name     string
	Selector *selector.Selector
	// StaticDiscovery: once the volume group exists, new devices are not added (v1 deviceDiscoveryPolicy
	// Static without paths).
	StaticDiscovery bool
}

// Input is everything one filter pass looks at.
type Input struct {
	Inventory *blockdev.Inventory
	// Report is the LVM state the agent sees.
	Report *lvm.Report
	// Scoped is true when the agent uses its own LVM devices file: an LVM label LVM does not report then
	// belongs to someone else.
	Scoped bool
	// VolumeGroups in spec order.
	VolumeGroups []VolumeGroup
	// MinSize overrides DefaultMinSize when not zero.
	MinSize uint64
	// ReferencedBy maps devices (kernel names) that PersistentVolumes use directly to such a volume's name.
	ReferencedBy map[string]string
}

// Reason is why a device is excluded.
type Reason struct {
	Code    lvmv2.ReasonCode
	Message string
}

// Excluded is a candidate that is not used.
type Excluded struct {
	// KName of the device, or the selector's path when it was not found.
	KName   string
	Reasons []Reason
	// Match is the selector's verdict for a device the selector picked (nil for NotFound and NotSelected).
	Match *selector.Match
}

// Codes returns the reason codes as strings, in order.
func (e Excluded) Codes() []string {
	out := make([]string, len(e.Reasons))
	for i, r := range e.Reasons {
		out[i] = string(r.Code)
	}
	return out
}

// Messages returns the reason sentences, in order.
func (e Excluded) Messages() []string {
	out := make([]string, len(e.Reasons))
	for i, r := range e.Reasons {
		out[i] = r.Message
	}
	return out
}

// Has reports whether the exclusion carries code.
func (e Excluded) Has(code lvmv2.ReasonCode) bool {
	return slices.ContainsFunc(e.Reasons, func(r Reason) bool { return r.Code == code })
}

// Candidate is a device the volume group can use: a new device to add, or (Member) a physical volume it
// already has.
type Candidate struct {
	// Device is nil for a member whose device is missing.
	Device *blockdev.Device
	// PVName is the physical volume name LVM uses (members and orphan PVs).
	PVName string
	// Member is true when the device is already a physical volume of the volume group.
	Member bool
	// Orphan is true when the device is a physical volume of no volume group yet.
	Orphan bool
	// Selected is false for a member the selector no longer picks (a day-2 removal).
	Selected bool
	// Match is the selector's verdict.
	Match selector.Match
}

// KName is the device's kernel name, or the PV name of a missing member.
func (c Candidate) KName() string {
	if c.Device != nil {
		return c.Device.KName
	}
	return c.PVName
}

// Result is the outcome for one volume group.
type Result struct {
	Name string
	// Exists is true when LVM reports the volume group (tagged as ours).
	Exists bool
	// Members are its physical volumes, sorted.
	Members []Candidate
	// New are devices that pass every filter and are not members yet, sorted.
	New []Candidate
	// Excluded devices, sorted.
	Excluded []Excluded
	// MissingRequired are v1 paths that do not resolve (the volume group fails without them).
	MissingRequired []string
	// NoOptionalFound is true when the selector has optionalPaths and none of them resolves.
	NoOptionalFound bool
}

// Run filters the devices for every volume group.
func Run(in Input) []Result {
	p := newPass(in)
	results := make([]Result, len(in.VolumeGroups))
	passing := make([][]Candidate, len(in.VolumeGroups))
	for i, vg := range in.VolumeGroups {
		results[i], passing[i] = p.volumeGroup(vg)
	}
	p.assign(results, passing)
	for i := range results {
		slices.SortFunc(results[i].Excluded, func(a, b Excluded) int { return strings.Compare(a.KName, b.KName) })
	}
	return results
}

// pass holds the lookups one Run shares between volume groups.
type pass struct {
	in      Input
	minSize uint64
	ours    map[string]bool   // our (tagged) volume groups
	pvVG    map[string]string // device kname -> volume group of its PV ("" for an orphan)
	pvName  map[string]string // device kname -> PV name
	lvOwner map[string]string // device kname of an LV -> its volume group
}

func newPass(in Input) *pass {
	p := &pass{in: in, minSize: in.MinSize, ours: map[string]bool{}, pvVG: map[string]string{}, pvName: map[string]string{},
		lvOwner: map[string]string{}}
	if p.minSize == 0 {
		p.minSize = DefaultMinSize
	}
	if in.Report == nil {
		p.in.Report = &lvm.Report{}
	}
	for _, vg := range p.in.Report.VGs {
		if vg.HasTag(lvm.OwnerTag) {
			p.ours[vg.Name] = true
		}
	}
	for _, pv := range p.in.Report.PVs {
		kname := pv.Name
		if d, ok := in.Inventory.Resolve(pv.Name); ok {
			kname = d.KName
		}
		p.pvVG[kname], p.pvName[kname] = pv.VGName, pv.Name
	}
	for i := range in.Inventory.Devices {
		d := &in.Inventory.Devices[i]
		if d.Type != blockdev.TypeLVM {
			continue
		}
		if vg, ok := splitDMName(strings.TrimPrefix(d.Name, "/dev/mapper/")); ok {
			if _, known := p.in.Report.VG(vg); known {
				p.lvOwner[d.KName] = vg
			}
		}
	}
	return p
}

// volumeGroup runs the selector and the filters for one volume group; it returns the result without
// claims between volume groups, and the devices that passed every filter.
func (p *pass) volumeGroup(vg VolumeGroup) (Result, []Candidate) {
	res := Result{Name: vg.Name}
	if v, ok := p.in.Report.VG(vg.Name); ok && v.HasTag(lvm.OwnerTag) {
		res.Exists = true
	}
	inv := p.in.Inventory
	for _, pv := range p.in.Report.PVsOf(vg.Name) {
		if !res.Exists {
			break
		}
		c := Candidate{PVName: pv.Name, Member: true}
		if d, ok := inv.Resolve(pv.Name); ok && !pv.Missing {
			c.Device = d
			c.Match = vg.Selector.Match(inv, d)
			c.Selected = c.Match.Selected
		}
		res.Members = append(res.Members, c)
	}
	slices.SortFunc(res.Members, func(a, b Candidate) int { return strings.Compare(a.KName(), b.KName()) })

	optional, optionalFound := 0, 0
	for _, np := range vg.Selector.NamedPaths() {
		_, found := inv.Resolve(np.Path)
		if np.Optional {
			optional++
			if found {
				optionalFound++
			}
		}
		if found {
			continue
		}
		if np.Required {
			res.MissingRequired = append(res.MissingRequired, np.Path)
		}
		res.Excluded = append(res.Excluded, Excluded{KName: np.Path, Reasons: []Reason{{lvmv2.ReasonNotFound,
			fmt.Sprintf("%s was not found on this node", np.Path)}}})
	}
	res.NoOptionalFound = optional > 0 && optionalFound == 0

	var passing []Candidate
	for i := range inv.Devices {
		d := &inv.Devices[i]
		if slices.ContainsFunc(res.Members, func(c Candidate) bool { return c.Device != nil && c.Device.KName == d.KName }) {
			continue
		}
		m := vg.Selector.Match(inv, d)
		if !m.Selected {
			if m.Partial {
				res.Excluded = append(res.Excluded, Excluded{KName: d.KName, Reasons: []Reason{{lvmv2.ReasonNotSelected,
					"not selected: " + m.Explanation}}})
			}
			continue
		}
		if m.Wildcard && d.Type == blockdev.TypeLVM && p.ours[p.lvOwner[d.KName]] {
			continue // our own volumes: not candidates worth listing
		}
		if o := p.pvVG[d.KName]; o != "" && o != vg.Name && p.ours[o] {
			// A physical volume of another of our volume groups: that is the whole story.
			res.Excluded = append(res.Excluded, Excluded{KName: d.KName, Reasons: []Reason{usedBy(d.KName, o, vg.Name, m.Wildcard)}, Match: &m})
			continue
		}
		reasons := p.filter(d)
		if len(reasons) > 0 {
			res.Excluded = append(res.Excluded, Excluded{KName: d.KName, Reasons: reasons, Match: &m})
			continue
		}
		c := Candidate{Device: d, Selected: true, Match: m}
		if name, ok := p.pvName[d.KName]; ok && p.pvVG[d.KName] == "" {
			c.Orphan, c.PVName = true, name
		}
		passing = append(passing, c)
	}
	return res, passing
}

// assign gives each passing device to one volume group: devices already in one of our volume groups stay
// there, then volume groups that name a device explicitly claim it before wildcard ones, in spec order.
func (p *pass) assign(results []Result, passing [][]Candidate) {
	owner := map[string]string{}
	for kname, vg := range p.pvVG {
		if vg != "" && p.ours[vg] {
			owner[kname] = vg
		}
	}
	order := make([]int, 0, len(results))
	for i := range results {
		order = append(order, i)
	}
	explicitFirst := func(explicit bool) {
		for _, i := range order {
			for _, c := range passing[i] {
				if c.Match.Explicit != explicit {
					continue
				}
				if _, taken := owner[c.Device.KName]; !taken {
					owner[c.Device.KName] = results[i].Name
				}
			}
		}
	}
	explicitFirst(true)
	explicitFirst(false)
	for i := range results {
		vg := p.in.VolumeGroups[i]
		for _, c := range passing[i] {
			kname := c.Device.KName
			if o := owner[kname]; o != results[i].Name {
				results[i].Excluded = append(results[i].Excluded, Excluded{KName: kname, Reasons: []Reason{usedBy(kname, o, vg.Name, c.Match.Wildcard)}, Match: &c.Match})
				continue
			}
			if vg.StaticDiscovery && results[i].Exists {
				results[i].Excluded = append(results[i].Excluded, Excluded{KName: kname, Reasons: []Reason{{lvmv2.ReasonStaticDiscovery,
					fmt.Sprintf("%s was not part of %s when it was created (static device discovery); set deviceDiscoveryPolicy: Dynamic to add new devices", kname, vg.Name)}}, Match: &c.Match})
				continue
			}
			results[i].New = append(results[i].New, c)
		}
	}
}

func usedBy(kname, owner, vg string, wildcard bool) Reason {
	msg := fmt.Sprintf("%s is already being used by %s and cannot be used by %s too", kname, owner, vg)
	if wildcard {
		msg = fmt.Sprintf("%s is already being used by %s and cannot be used by a wildcard (Any) volumeGroup", kname, owner)
	}
	return Reason{lvmv2.ReasonUsedByOtherVolumeGroup, msg}
}

// splitDMName returns the volume group of a device-mapper name lvm2 made for an LV: "<vg>-<lv>[-layer]",
// with every '-' inside the VG and LV names doubled.
func splitDMName(name string) (string, bool) {
	for i := 0; i < len(name); i++ {
		if name[i] != '-' {
			continue
		}
		if i+1 < len(name) && name[i+1] == '-' {
			i++ // an escaped '-'
			continue
		}
		return strings.ReplaceAll(name[:i], "--", "-"), i > 0
	}
	return "", false
}
