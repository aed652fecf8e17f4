package lvmdapi

import (
	"fmt"
	"math"
	"slices"
	"strings"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/lvms-dev/lvms/nodeagent/lvm"
	"github.com/lvms-dev/lvms/nodeagent/lvmd"
)

// classState is what one device class has in the LVM state.
type classState struct {
	class lvmd.DeviceClass
	vg    lvm.VG
	// pool is the thin pool of a thin class.
	pool lvm.LV
	// volumes are the class's volumes: thick LVs of the VG (no pools, no thin or hidden LVs), or the thin
	// volumes of the pool.
	volumes []lvm.LV
	// all are every LV of the VG, hidden ones included.
	all []lvm.LV
}

// stateOf finds a device class's VG, pool and volumes in a report.
func stateOf(rep *lvm.Report, d lvmd.DeviceClass) (classState, error) {
	vg, ok := rep.VG(d.VolumeGroup)
	if !ok {
		return classState{}, fmt.Errorf("volume group %q of device class %q not found", d.VolumeGroup, d.Name)
	}
	st := classState{class: d, vg: vg}
	if isThin(d) {
		pool, ok := rep.LV(d.VolumeGroup, d.ThinPool.Name)
		if !ok || !pool.IsThinPool() {
			return classState{}, fmt.Errorf("thin pool %s/%s of device class %q not found", d.VolumeGroup, d.ThinPool.Name, d.Name)
		}
		st.pool = pool
	}
	st.all = rep.LVsOf(d.VolumeGroup)
	for _, lv := range st.all {
		switch {
		case isThin(d) && lv.PoolLV == d.ThinPool.Name && lv.IsThinVolume():
			st.volumes = append(st.volumes, lv)
		case !isThin(d) && !lv.IsThinPool() && !lv.IsThinVolume() && !lv.IsPrivate():
			st.volumes = append(st.volumes, lv)
		}
	}
	return st, nil
}

// volume returns the class's volume named name.
func (s classState) volume(name string) (lvm.LV, bool) {
	for _, lv := range s.volumes {
		if lv.Name == name {
			return lv, true
		}
	}
	return lvm.LV{}, false
}

// lv returns any LV of the class's VG named name.
func (s classState) lv(name string) (lvm.LV, bool) {
	i := slices.IndexFunc(s.all, func(lv lvm.LV) bool { return lv.Name == name })
	if i < 0 {
		return lvm.LV{}, false
	}
	return s.all[i], true
}

// allocatable is what a new volume may take: the VG's free bytes for a thick class (spare is not
// subtracted, as in TopoLVM), thinAllowance for a thin one.
func (s classState) allocatable() uint64 {
	if isThin(s.class) {
		return thinAllowance(s.thinInput())
	}
	return s.vg.Free
}

// reported is the capacity reported for annotations and metrics: thick VG free − spare, thin
// thinAllowance (spare ignored).
func (s classState) reported() uint64 {
	if isThin(s.class) {
		return thinAllowance(s.thinInput())
	}
	return subFloor(s.vg.Free, spare(s.class))
}

// thinInput is what thinAllowance needs of a thin class's state.
func (s classState) thinInput() thinInput {
	in := thinInput{Ratio: s.class.ThinPool.OverprovisionRatio, PoolSize: s.pool.Size,
		Data: poolPercent(s.pool.DataPercent), Metadata: poolPercent(s.pool.MetadataPercent)}
	in.DataThreshold, in.MetadataThreshold = s.class.ThinPool.Thresholds()
	for _, lv := range s.volumes {
		in.Virtual += lv.Size
	}
	return in
}

// thinInput is a thin pool as capacity sees it.
type thinInput struct {
	Ratio    float64
	PoolSize uint64
	// Virtual is Σ virtual sizes of the pool's thin volumes: what they were promised.
	Virtual uint64
	// Data and Metadata are the pool's real usage in percent as lvm2 reports it; NaN when lvm2 does not
	// say (an inactive pool) or says something that is not a percentage.
	Data, Metadata float64
	// DataThreshold and MetadataThreshold are the device class's thresholds in percent.
	DataThreshold, MetadataThreshold float64
}

// thinAllowance is a thin class's capacity, the one number lvmd, the capacity annotations (and so
// CSIStorageCapacity and scheduling) and the metrics report: the smaller of what the over-provision ratio
// still allows (floor(ratio × pool) − Σ virtual sizes) and what the pool's real data use leaves below its
// data threshold (floor(threshold × pool) − used); 0 once metadata is at its threshold. The ratio alone
// would keep offering a pool whose volumes already filled it with real data. Usage lvm2 does not report
// leaves the ratio's figure.
func thinAllowance(in thinInput) uint64 {
	limit := math.Floor(in.Ratio * float64(in.PoolSize))
	free := 0.0
	if promised := float64(in.Virtual); promised < limit {
		free = limit - promised
	}
	if !math.IsNaN(in.Metadata) && in.Metadata >= in.MetadataThreshold {
		return 0
	}
	if !math.IsNaN(in.Data) {
		size := float64(in.PoolSize)
		left := math.Floor(in.DataThreshold/100*size) - math.Ceil(in.Data/100*size)
		free = max(min(free, left), 0)
	}
	return uint64(free)
}

// poolPercent parses a pool's usage percent; NaN when lvm2 reports none or no percentage.
func poolPercent(s string) float64 {
	if strings.TrimSpace(s) == "" {
		return math.NaN()
	}
	f, err := lvm.ParsePercent(s)
	if err != nil || math.IsInf(f, 0) || f < 0 {
		return math.NaN()
	}
	return f
}

// pastThreshold refuses a new thin volume (or more space for one) in a pool whose real data or metadata
// use is at its threshold, naming the pool, its use, the threshold and what to do. Existing volumes keep
// working: this only stops promising more of a pool that is nearly out of real space.
func (s classState) pastThreshold() error {
	if !isThin(s.class) {
		return nil
	}
	in := s.thinInput()
	var kind string
	var used, threshold float64
	switch {
	case !math.IsNaN(in.Metadata) && in.Metadata >= in.MetadataThreshold:
		kind, used, threshold = "metadata", in.Metadata, in.MetadataThreshold
	case !math.IsNaN(in.Data) && in.Data >= in.DataThreshold:
		kind, used, threshold = "data", in.Data, in.DataThreshold
	default:
		return nil
	}
	return status.Errorf(codes.ResourceExhausted,
		"thin pool %s of device class %q is past its %s usage threshold (%.1f%% used, threshold %g%%): no new volume is placed on it, existing volumes keep working; "+
			"extend the pool (add a device to volume group %s), free space in its volumes (fstrim, delete unused volumes and snapshots) or raise the device class's %sUsageThreshold (lvmd.yaml: %s-usage-threshold)",
		s.vg.Name+"/"+s.pool.Name, s.class.Name, kind, used, threshold, s.vg.Name, kind, kind)
}

// spaceDetail says, for a thin class, what its free figure comes from: a request that does not fit is
// often short of the pool's real space, not of the ratio.
func (s classState) spaceDetail() string {
	if !isThin(s.class) {
		return ""
	}
	in := s.thinInput()
	usage := "usage unknown"
	if !math.IsNaN(in.Data) {
		usage = fmt.Sprintf("%.1f%% of its data used, threshold %g%%", in.Data, in.DataThreshold)
	}
	return fmt.Sprintf(" (thin pool %s/%s: %s; over-provision ratio %g, %d bytes promised to volumes)", s.vg.Name, s.pool.Name, usage, in.Ratio, in.Virtual)
}

func subFloor(a, b uint64) uint64 {
	if a < b {
		return 0
	}
	return a - b
}
