package lvmdapi

import (
	"fmt"
	"math"
	"slices"

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
// subtracted, as in TopoLVM), the overprovisioned free bytes for a thin one.
func (s classState) allocatable() uint64 {
	if isThin(s.class) {
		return s.overprovisionFree()
	}
	return s.vg.Free
}

// overprovisionFree is floor(ratio × pool size) − Σ virtual sizes of the pool's thin volumes, at least 0.
func (s classState) overprovisionFree() uint64 {
	limit := math.Floor(s.class.ThinPool.OverprovisionRatio * float64(s.pool.Size))
	var used float64
	for _, lv := range s.volumes {
		used += float64(lv.Size)
	}
	if used >= limit {
		return 0
	}
	return uint64(limit - used)
}

// reported is the capacity reported for annotations and metrics: thick VG free − spare, thin
// overprovisioned free (spare ignored).
func (s classState) reported() uint64 {
	if isThin(s.class) {
		return s.overprovisionFree()
	}
	return subFloor(s.vg.Free, spare(s.class))
}

func subFloor(a, b uint64) uint64 {
	if a < b {
		return 0
	}
	return a - b
}
