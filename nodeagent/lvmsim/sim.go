package lvmsim

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/lvms-dev/lvms/nodeagent/lvm"
)

// ExtentSize is the extent size of every simulated VG (lvm2's default).
const ExtentSize = 4 << 20

// LV is a simulated logical volume.
type LV struct {
	VG, Name string
	Size     uint64
	// Pool is set for thin volumes; ThinPool marks the pool itself.
	Pool     string
	ThinPool bool
	Origin   string
	Tags     []string
	ReadOnly bool
	Active   bool
	// Health is lvm2's lv_health_status ("" when healthy).
	Health string
}

type vg struct {
	name string
	size uint64
}

// LVM is the simulated lvm2. The zero value is not usable: call New.
type LVM struct {
	mu  sync.Mutex
	vgs []vg
	lvs []*LV
	// Fail makes the next command whose argv (after "lvm") starts with the key fail with the value as
	// stderr and exit code 5, once.
	fail map[string]string
	// usage overrides pools' reported data and metadata percent, by vg/pool.
	usage map[string][2]string
}

// New returns a simulated lvm2 with no volume groups.
func New() *LVM { return &LVM{fail: map[string]string{}} }

// Runner returns an lvm.Runner that runs lvm2 commands against s.
func (s *LVM) Runner() lvm.Runner { return lvm.Runner{Exec: s} }

// AddVG adds a volume group of size bytes.
func (s *LVM) AddVG(name string, size uint64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.vgs = append(s.vgs, vg{name: name, size: size / ExtentSize * ExtentSize})
}

// AddThinPool adds a thin pool of size bytes to a volume group.
func (s *LVM) AddThinPool(vgName, name string, size uint64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.lvs = append(s.lvs, &LV{VG: vgName, Name: name, Size: roundUp(size), ThinPool: true, Active: true})
}

// SetPoolUsage makes a thin pool report data and metadata usage as lvm2 prints it ("92.50"; "" for
// none), as real writes into its volumes would.
func (s *LVM) SetPoolUsage(vgName, name, data, metadata string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.usage == nil {
		s.usage = map[string][2]string{}
	}
	s.usage[vgName+"/"+name] = [2]string{data, metadata}
}

// ResetPoolUsage makes a thin pool report the simulator's own usage again (1 % per thin volume).
func (s *LVM) ResetPoolUsage(vgName, name string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.usage, vgName+"/"+name)
}

// FailNext makes the next lvm2 command starting with prefix (for example "lvcreate") fail with stderr.
func (s *LVM) FailNext(prefix, stderr string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.fail[prefix] = stderr
}

// SetHealth sets an LV's lv_health_status.
func (s *LVM) SetHealth(vgName, name, health string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if lv := s.find(vgName, name); lv != nil {
		lv.Health = health
	}
}

// LVs returns a copy of the LVs of a volume group (thin pools included), sorted by name.
func (s *LVM) LVs(vgName string) []LV {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []LV
	for _, lv := range s.lvs {
		if lv.VG == vgName {
			c := *lv
			c.Tags = slices.Clone(lv.Tags)
			out = append(out, c)
		}
	}
	slices.SortFunc(out, func(a, b LV) int { return strings.Compare(a.Name, b.Name) })
	return out
}

// LV returns one LV.
func (s *LVM) LV(vgName, name string) (LV, bool) {
	for _, lv := range s.LVs(vgName) {
		if lv.Name == name {
			return lv, true
		}
	}
	return LV{}, false
}

func roundUp(size uint64) uint64 { return (size + ExtentSize - 1) / ExtentSize * ExtentSize }

func (s *LVM) find(vgName, name string) *LV {
	for _, lv := range s.lvs {
		if lv.VG == vgName && lv.Name == name {
			return lv
		}
	}
	return nil
}

func (s *LVM) vg(name string) *vg {
	for i := range s.vgs {
		if s.vgs[i].name == name {
			return &s.vgs[i]
		}
	}
	return nil
}

// used is the space allocated in a VG: thick LVs and thin pools (thin volumes live in their pool).
func (s *LVM) used(vgName string) uint64 {
	var n uint64
	for _, lv := range s.lvs {
		if lv.VG == vgName && lv.Pool == "" {
			n += lv.Size
		}
	}
	return n
}

// result is a command's outcome.
type result struct {
	stdout string
	stderr string
	code   int
}

func failed(code int, format string, a ...any) result {
	return result{stderr: fmt.Sprintf(format, a...), code: code}
}

// Execute implements lvm.Executor. Only "lvm" commands are simulated; other programs fail with exit code
// 127 as if they were not installed.
func (s *LVM) Execute(_ context.Context, cmd lvm.Command) (lvm.Result, error) {
	argv := cmd.Argv
	if len(argv) == 0 || (argv[0] != "lvm" && !strings.HasSuffix(argv[0], "/lvm")) {
		return lvm.Result{ExitCode: 127, Stderr: []byte(fmt.Sprintf("%v: not simulated", argv))}, nil
	}
	args := dropDevicesFile(argv[1:])
	if len(args) == 0 {
		return lvm.Result{ExitCode: 3, Stderr: []byte("no lvm command")}, nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for prefix, msg := range s.fail {
		if strings.HasPrefix(strings.Join(args, " "), prefix) {
			delete(s.fail, prefix)
			return lvm.Result{ExitCode: 5, Stderr: []byte(msg)}, nil
		}
	}
	var r result
	switch args[0] {
	case "fullreport":
		r = s.fullReport()
	case "lvcreate":
		r = s.lvcreate(args[1:])
	case "lvresize", "lvextend":
		r = s.lvresize(args[1:])
	case "lvremove":
		r = s.lvremove(args[1:])
	case "lvchange":
		r = s.lvchange(args[1:])
	default:
		r = failed(3, "%s: not simulated", args[0])
	}
	return lvm.Result{Stdout: []byte(r.stdout), Stderr: []byte(r.stderr), ExitCode: r.code}, nil
}

func dropDevicesFile(args []string) []string {
	out := make([]string, 0, len(args))
	for i := 0; i < len(args); i++ {
		if args[i] == "--devicesfile" {
			i++
			continue
		}
		out = append(out, args[i])
	}
	return out
}

func parseBytes(v string) (uint64, error) {
	v = strings.TrimSuffix(strings.ToLower(v), "b")
	return strconv.ParseUint(v, 10, 64)
}

func splitLV(path string) (string, string) {
	path = strings.TrimPrefix(path, "/dev/")
	vgName, lvName, _ := strings.Cut(path, "/")
	return vgName, lvName
}

// flags parses "-x value" style arguments; the listed boolean flags take no value.
func flags(args []string, boolean ...string) (map[string][]string, []string) {
	m := map[string][]string{}
	var pos []string
	for i := 0; i < len(args); i++ {
		a := args[i]
		switch {
		case !strings.HasPrefix(a, "-"):
			pos = append(pos, a)
		case slices.Contains(boolean, a):
			m[a] = append(m[a], "")
		case strings.Contains(a, "="):
			k, v, _ := strings.Cut(a, "=")
			m[k] = append(m[k], v)
		case i+1 < len(args):
			m[a] = append(m[a], args[i+1])
			i++
		default:
			m[a] = append(m[a], "")
		}
	}
	return m, pos
}

func first(m map[string][]string, keys ...string) string {
	for _, k := range keys {
		if v, ok := m[k]; ok && len(v) > 0 {
			return v[0]
		}
	}
	return ""
}

func (s *LVM) lvcreate(args []string) result {
	f, pos := flags(args, "-y", "-s", "--yes", "--snapshot")
	name := first(f, "-n", "--name")
	tags := f["--addtag"]
	if _, snap := f["-s"]; snap {
		if len(pos) != 1 {
			return failed(3, "lvcreate -s: want one origin")
		}
		vgName, src := splitLV(pos[0])
		origin := s.find(vgName, src)
		if origin == nil {
			return failed(5, "Failed to find logical volume \"%s/%s\"", vgName, src)
		}
		if s.find(vgName, name) != nil {
			return failed(5, "Logical Volume \"%s\" already exists in volume group \"%s\"", name, vgName)
		}
		if origin.Pool == "" {
			return failed(5, "Snapshots of a thick LV need a size (-L); only thin snapshots are simulated.")
		}
		s.lvs = append(s.lvs, &LV{VG: vgName, Name: name, Size: origin.Size, Pool: origin.Pool, Origin: src,
			Tags: slices.Clone(tags), Active: first(f, "-k") == "n"})
		return result{stdout: fmt.Sprintf("  Logical volume \"%s\" created.\n", name)}
	}
	if pool := first(f, "-T", "--thin", "--thinpool"); pool != "" {
		vgName, poolName := splitLV(pool)
		p := s.find(vgName, poolName)
		if p == nil || !p.ThinPool {
			return failed(5, "Failed to find logical volume \"%s/%s\"", vgName, poolName)
		}
		size, err := parseBytes(first(f, "-V", "--virtualsize"))
		if err != nil || size == 0 {
			return failed(3, "Invalid virtual size %q", first(f, "-V"))
		}
		if s.find(vgName, name) != nil {
			return failed(5, "Logical Volume \"%s\" already exists in volume group \"%s\"", name, vgName)
		}
		s.lvs = append(s.lvs, &LV{VG: vgName, Name: name, Size: roundUp(size), Pool: poolName, Tags: slices.Clone(tags), Active: true})
		return result{stdout: fmt.Sprintf("  Logical volume \"%s\" created.\n", name)}
	}
	if len(pos) != 1 {
		return failed(3, "Please specify a volume group")
	}
	vgName := pos[0]
	g := s.vg(vgName)
	if g == nil {
		return failed(5, "Volume group \"%s\" not found", vgName)
	}
	size, err := parseBytes(first(f, "-L", "--size"))
	if err != nil || size == 0 {
		return failed(3, "Invalid size %q", first(f, "-L"))
	}
	if s.find(vgName, name) != nil {
		return failed(5, "Logical Volume \"%s\" already exists in volume group \"%s\"", name, vgName)
	}
	size = roundUp(size)
	if free := g.size - s.used(vgName); size > free {
		return failed(5, "Volume group \"%s\" has insufficient free space (%d extents): %d required.", vgName, free/ExtentSize, size/ExtentSize)
	}
	s.lvs = append(s.lvs, &LV{VG: vgName, Name: name, Size: size, Tags: slices.Clone(tags), Active: true})
	return result{stdout: fmt.Sprintf("  Logical volume \"%s\" created.\n", name)}
}

func (s *LVM) lvresize(args []string) result {
	f, pos := flags(args, "-y", "-f", "-r")
	if len(pos) != 1 {
		return failed(3, "lvresize: want one LV")
	}
	vgName, name := splitLV(pos[0])
	lv := s.find(vgName, name)
	if lv == nil {
		return failed(5, "Failed to find logical volume \"%s/%s\"", vgName, name)
	}
	size, err := parseBytes(first(f, "-L", "--size"))
	if err != nil || size == 0 {
		return failed(3, "Invalid size %q", first(f, "-L"))
	}
	size = roundUp(size)
	if size < lv.Size {
		return failed(5, "Reducing is not simulated.")
	}
	if lv.Pool == "" {
		g := s.vg(vgName)
		if free := g.size - s.used(vgName); size-lv.Size > free {
			return failed(5, "Insufficient free space: %d extents needed, but only %d available", (size-lv.Size)/ExtentSize, free/ExtentSize)
		}
	}
	lv.Size = size
	return result{stdout: fmt.Sprintf("  Logical volume %s/%s successfully resized.\n", vgName, name)}
}

func (s *LVM) lvremove(args []string) result {
	_, pos := flags(args, "-y", "-f", "--yes", "--force")
	if len(pos) != 1 {
		return failed(3, "lvremove: want one LV")
	}
	vgName, name := splitLV(pos[0])
	if s.vg(vgName) == nil {
		return failed(5, "Volume group \"%s\" not found", vgName)
	}
	i := slices.IndexFunc(s.lvs, func(lv *LV) bool { return lv.VG == vgName && lv.Name == name })
	if i < 0 {
		return failed(5, "Failed to find logical volume \"%s/%s\"", vgName, name)
	}
	s.lvs = slices.Delete(s.lvs, i, i+1)
	return result{stdout: fmt.Sprintf("  Logical volume \"%s\" successfully removed.\n", name)}
}

func (s *LVM) lvchange(args []string) result {
	f, pos := flags(args, "-y", "-ay", "-an", "-K")
	if len(pos) != 1 {
		return failed(3, "lvchange: want one LV")
	}
	vgName, name := splitLV(pos[0])
	lv := s.find(vgName, name)
	if lv == nil {
		return failed(5, "Failed to find logical volume \"%s/%s\"", vgName, name)
	}
	if first(f, "-p", "--permission") == "r" {
		lv.ReadOnly = true
	}
	if a := first(f, "-a", "--activate"); a == "y" {
		lv.Active = true
	}
	if _, ok := f["-ay"]; ok {
		lv.Active = true
	}
	return result{stdout: ""}
}

func (lv *LV) attr() string {
	a := []byte("-wi-a-----")
	switch {
	case lv.ThinPool:
		a = []byte("twi-a-tz--")
	case lv.Pool != "":
		a = []byte("Vwi-a-tz--")
	}
	if lv.ReadOnly {
		a[1] = 'r'
	}
	if !lv.Active {
		a[4] = '-'
	}
	if lv.Health != "" {
		a[8] = lv.Health[0]
	}
	return string(a)
}

// fullReport renders the state as `lvm fullreport --reportformat json` does: one report per VG.
func (s *LVM) fullReport() result {
	type sub struct {
		VG  []map[string]string `json:"vg"`
		PV  []map[string]string `json:"pv"`
		LV  []map[string]string `json:"lv"`
		Seg []map[string]string `json:"seg"`
	}
	var rep struct {
		Report []sub `json:"report"`
	}
	for _, g := range s.vgs {
		free := g.size - s.used(g.name)
		sb := sub{VG: []map[string]string{{
			"vg_name": g.name, "vg_uuid": "uuid-" + g.name, "vg_size": u(g.size), "vg_free": u(free),
			"vg_extent_size": u(ExtentSize), "vg_extent_count": u(g.size / ExtentSize), "vg_free_count": u(free / ExtentSize),
			"vg_attr": "wz--n-", "pv_count": "1",
		}}, PV: []map[string]string{{}}}
		for _, lv := range s.lvs {
			if lv.VG != g.name {
				continue
			}
			row := map[string]string{
				"lv_name": lv.Name, "lv_uuid": "uuid-" + g.name + "-" + lv.Name, "lv_full_name": g.name + "/" + lv.Name,
				"lv_path": "/dev/" + g.name + "/" + lv.Name, "vg_name": g.name, "lv_size": u(lv.Size), "lv_attr": lv.attr(),
				"lv_tags": strings.Join(lv.Tags, ","), "pool_lv": lv.Pool, "origin": lv.Origin, "lv_health_status": lv.Health,
			}
			if lv.ThinPool {
				row["data_percent"] = fmt.Sprintf("%.2f", s.poolData(lv))
				row["metadata_percent"] = "1.50"
				if u, ok := s.usage[g.name+"/"+lv.Name]; ok {
					row["data_percent"], row["metadata_percent"] = u[0], u[1]
				}
				row["lv_path"] = ""
				row["lv_layout"] = "thin,pool"
			} else if lv.Pool != "" {
				row["data_percent"] = "0.00"
			}
			sb.LV = append(sb.LV, row)
		}
		rep.Report = append(rep.Report, sb)
	}
	out, err := json.Marshal(rep)
	if err != nil {
		return failed(5, "encode report: %v", err)
	}
	return result{stdout: string(out)}
}

// poolData is a made-up but monotonic data usage: 1% per thin volume, at most 100.
func (s *LVM) poolData(pool *LV) float64 {
	n := 0
	for _, lv := range s.lvs {
		if lv.VG == pool.VG && lv.Pool == pool.Name {
			n++
		}
	}
	return float64(min(n, 100))
}

func u(n uint64) string { return strconv.FormatUint(n, 10) }
