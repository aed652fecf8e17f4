package lvm

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// Fields asked from `lvm fullreport`, per subreport. Fullreport cannot mix segment fields into the LV
// subreport, so the chunk size and segment type come from the seg subreport, joined by lv_uuid.
var (
	vgFields  = "vg_name,vg_uuid,vg_tags,vg_attr,vg_size,vg_free,vg_extent_size,vg_extent_count,vg_free_count,pv_count,lv_count,vg_missing_pv_count"
	pvFields  = "pv_name,pv_uuid,vg_name,pv_size,pv_free,pv_used,dev_size,pv_attr,pv_tags,pv_missing,pv_device_id,pv_device_id_type"
	lvFields  = "lv_name,lv_uuid,lv_full_name,lv_path,vg_name,lv_size,lv_attr,lv_tags,pool_lv,origin,data_percent,metadata_percent,lv_metadata_size,lv_layout,lv_role,lv_health_status"
	segFields = "lv_uuid,segtype,chunk_size,stripes"
)

// FullReportArgs are the arguments of the one lvm2 command that reads the state of every VG, PV and LV
// the runner can see.
func FullReportArgs() []string {
	return []string{"--reportformat", "json", "--units", "b", "--nosuffix",
		"--configreport", "vg", "-o", vgFields,
		"--configreport", "pv", "-o", pvFields,
		"--configreport", "lv", "-o", lvFields,
		"--configreport", "pvseg", "-o", "pvseg_start",
		"--configreport", "seg", "-o", segFields}
}

// FullReport reads every VG, PV and LV in one command.
func (r Runner) FullReport(ctx context.Context) (*Report, error) {
	out, err := r.LVMCmd(ctx, "fullreport", FullReportArgs()...)
	if err != nil {
		return nil, fmt.Errorf("read LVM state: %w", err)
	}
	rep, err := ParseReport(out)
	if err != nil {
		return nil, fmt.Errorf("read LVM state: %w", err)
	}
	return rep, nil
}

// Report is the LVM state the runner sees: every VG, PV (orphans included) and LV, each list sorted by
// name.
type Report struct {
	VGs []VG
	PVs []PV
	LVs []LV
}

// VG is a volume group.
type VG struct {
	Name        string
	UUID        string
	Tags        []string
	Attr        string
	Size        uint64
	Free        uint64
	ExtentSize  uint64
	ExtentCount uint64
	FreeCount   uint64
	PVCount     uint64
	LVCount     uint64
	MissingPVs  uint64
}

// HasTag reports whether the VG carries tag.
func (v VG) HasTag(tag string) bool { return slices.Contains(v.Tags, tag) }

// PV is a physical volume; VGName is empty for an orphan PV.
type PV struct {
	Name         string
	UUID         string
	VGName       string
	Size         uint64
	Free         uint64
	Used         uint64
	DevSize      uint64
	Attr         string
	Tags         []string
	Missing      bool
	DeviceID     string
	DeviceIDType string
}

// LV is a logical volume, hidden ones (thin pool data and metadata, pmspare) included.
type LV struct {
	// Name without the brackets lvm2 puts around hidden LVs.
	Name            string
	UUID            string
	FullName        string
	Path            string
	VGName          string
	Size            uint64
	Attr            string
	Tags            []string
	PoolLV          string
	Origin          string
	DataPercent     string
	MetadataPercent string
	MetadataSize    uint64
	Layout          []string
	Role            []string
	Health          string
	SegType         string
	ChunkSize       uint64
	Stripes         uint64
}

// IsThinPool reports whether the LV is a thin pool.
func (l LV) IsThinPool() bool { return len(l.Attr) > 0 && l.Attr[0] == 't' }

// IsThinVolume reports whether the LV is a thin volume.
func (l LV) IsThinVolume() bool { return len(l.Attr) > 0 && l.Attr[0] == 'V' }

// IsPrivate reports whether lvm2 uses the LV internally (pool data or metadata, pmspare, RAID images).
func (l LV) IsPrivate() bool { return slices.Contains(l.Role, "private") }

// Active reports whether the LV is active (lv_attr character 5).
func (l LV) Active() bool { return len(l.Attr) > 4 && l.Attr[4] == 'a' }

// VG returns the named volume group.
func (r *Report) VG(name string) (VG, bool) {
	for _, v := range r.VGs {
		if v.Name == name {
			return v, true
		}
	}
	return VG{}, false
}

// PVsOf returns the PVs of a volume group, sorted by name.
func (r *Report) PVsOf(vg string) []PV {
	var out []PV
	for _, p := range r.PVs {
		if p.VGName == vg {
			out = append(out, p)
		}
	}
	return out
}

// LVsOf returns the LVs of a volume group, sorted by name.
func (r *Report) LVsOf(vg string) []LV {
	var out []LV
	for _, l := range r.LVs {
		if l.VGName == vg {
			out = append(out, l)
		}
	}
	return out
}

// LV returns the named LV of a volume group.
func (r *Report) LV(vg, name string) (LV, bool) {
	for _, l := range r.LVs {
		if l.VGName == vg && l.Name == name {
			return l, true
		}
	}
	return LV{}, false
}

// PV returns the PV with the given device name.
func (r *Report) PV(name string) (PV, bool) {
	for _, p := range r.PVs {
		if p.Name == name {
			return p, true
		}
	}
	return PV{}, false
}

// rawReport is the JSON shape of lvm2's report: every value is a string.
type rawReport struct {
	Report []struct {
		VG  []map[string]string `json:"vg"`
		PV  []map[string]string `json:"pv"`
		LV  []map[string]string `json:"lv"`
		Seg []map[string]string `json:"seg"`
	} `json:"report"`
}

// ParseReport parses the JSON output of FullReportArgs (or of vgs/pvs/lvs with --reportformat json and the
// same fields). Empty numeric fields read as 0; malformed numbers are errors that name the field.
func ParseReport(data []byte) (*Report, error) {
	var raw rawReport
	if err := json.Unmarshal(data, &raw); err != nil {
		return nil, fmt.Errorf("parse lvm JSON report: %w", err)
	}
	rep := &Report{}
	segs := map[string]map[string]string{}
	for _, sub := range raw.Report {
		for _, s := range sub.Seg {
			// A segmented LV has several rows; the first one describes it well enough for the fields we
			// read (type, chunk size, stripes).
			if _, ok := segs[s["lv_uuid"]]; !ok {
				segs[s["lv_uuid"]] = s
			}
		}
	}
	for _, sub := range raw.Report {
		for _, m := range sub.VG {
			vg, err := parseVG(m)
			if err != nil {
				return nil, err
			}
			rep.VGs = append(rep.VGs, vg)
		}
		for _, m := range sub.PV {
			pv, err := parsePV(m)
			if err != nil {
				return nil, err
			}
			rep.PVs = append(rep.PVs, pv)
		}
		for _, m := range sub.LV {
			lv, err := parseLV(m, segs[m["lv_uuid"]])
			if err != nil {
				return nil, err
			}
			rep.LVs = append(rep.LVs, lv)
		}
	}
	slices.SortStableFunc(rep.VGs, func(a, b VG) int { return strings.Compare(a.Name, b.Name) })
	slices.SortStableFunc(rep.PVs, func(a, b PV) int { return strings.Compare(a.Name, b.Name) })
	slices.SortStableFunc(rep.LVs, func(a, b LV) int {
		if c := strings.Compare(a.VGName, b.VGName); c != 0 {
			return c
		}
		return strings.Compare(a.Name, b.Name)
	})
	return rep, nil
}

// fieldParser reads typed fields from one report row and remembers the first error.
type fieldParser struct {
	kind string
	row  map[string]string
	err  error
}

func (p *fieldParser) str(key string) string { return strings.TrimSpace(p.row[key]) }

func (p *fieldParser) num(key string) uint64 {
	v := p.str(key)
	if v == "" || p.err != nil {
		return 0
	}
	n, err := strconv.ParseUint(v, 10, 64)
	if err != nil {
		if f, ferr := strconv.ParseFloat(v, 64); ferr == nil && f >= 0 && f < 1<<63 {
			// Some lvm2 versions print sizes with a decimal part even with --units b.
			return uint64(f)
		}
		p.err = fmt.Errorf("parse lvm %s report: field %s: %q is not a number", p.kind, key, v)
	}
	return n
}

func (p *fieldParser) list(key string) []string {
	v := p.str(key)
	if v == "" {
		return nil
	}
	parts := strings.Split(v, ",")
	out := parts[:0]
	for _, s := range parts {
		if s = strings.TrimSpace(s); s != "" {
			out = append(out, s)
		}
	}
	return out
}

func parseVG(m map[string]string) (VG, error) {
	p := &fieldParser{kind: "vg", row: m}
	vg := VG{
		Name: p.str("vg_name"), UUID: p.str("vg_uuid"), Tags: p.list("vg_tags"), Attr: p.str("vg_attr"),
		Size: p.num("vg_size"), Free: p.num("vg_free"), ExtentSize: p.num("vg_extent_size"),
		ExtentCount: p.num("vg_extent_count"), FreeCount: p.num("vg_free_count"),
		PVCount: p.num("pv_count"), LVCount: p.num("lv_count"), MissingPVs: p.num("vg_missing_pv_count"),
	}
	return vg, p.err
}

func parsePV(m map[string]string) (PV, error) {
	p := &fieldParser{kind: "pv", row: m}
	pv := PV{
		Name: p.str("pv_name"), UUID: p.str("pv_uuid"), VGName: p.str("vg_name"),
		Size: p.num("pv_size"), Free: p.num("pv_free"), Used: p.num("pv_used"), DevSize: p.num("dev_size"),
		Attr: p.str("pv_attr"), Tags: p.list("pv_tags"), Missing: p.str("pv_missing") == "missing",
		DeviceID: p.str("pv_device_id"), DeviceIDType: p.str("pv_device_id_type"),
	}
	return pv, p.err
}

func parseLV(m, seg map[string]string) (LV, error) {
	p := &fieldParser{kind: "lv", row: m}
	name := strings.TrimSuffix(strings.TrimPrefix(p.str("lv_name"), "["), "]")
	lv := LV{
		Name: name, UUID: p.str("lv_uuid"), FullName: p.str("lv_full_name"), Path: p.str("lv_path"),
		VGName: p.str("vg_name"), Size: p.num("lv_size"), Attr: p.str("lv_attr"), Tags: p.list("lv_tags"),
		PoolLV: strings.Trim(p.str("pool_lv"), "[]"), Origin: strings.Trim(p.str("origin"), "[]"),
		DataPercent: p.str("data_percent"), MetadataPercent: p.str("metadata_percent"),
		MetadataSize: p.num("lv_metadata_size"), Layout: p.list("lv_layout"), Role: p.list("lv_role"),
		Health: p.str("lv_health_status"),
	}
	if seg != nil {
		sp := &fieldParser{kind: "seg", row: seg}
		lv.SegType, lv.ChunkSize, lv.Stripes = sp.str("segtype"), sp.num("chunk_size"), sp.num("stripes")
		if sp.err != nil {
			return lv, sp.err
		}
	}
	return lv, p.err
}

// ParsePercent parses an lvm2 percentage ("30.00"); empty is 0.
func ParsePercent(s string) (float64, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return 0, nil
	}
	f, err := strconv.ParseFloat(s, 64)
	if err != nil {
		return 0, fmt.Errorf("%q is not a percentage", s)
	}
	return f, nil
}
