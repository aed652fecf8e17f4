package transfer

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	topolvmv1 "github.com/lvms-dev/lvms/api/topolvm/v1"
	"github.com/lvms-dev/lvms/nodeagent/lvm"
	"github.com/lvms-dev/lvms/nodeagent/lvmd"
)

// ThinPoolFunc returns the thin pool of a device class ("" is the default class), nil for a thick class;
// an unknown class is an error.
type ThinPoolFunc func(deviceClass string) (*ThinPool, error)

// LVMDThinPools is the ThinPoolFunc of lvmd.yaml as config reads it: a thin class's pool with its usage
// thresholds (LVMS's defaults where the file has none).
func LVMDThinPools(config func() (*lvmd.Config, error)) ThinPoolFunc {
	return func(deviceClass string) (*ThinPool, error) {
		cfg, err := config()
		if err != nil {
			return nil, err
		}
		if cfg == nil {
			return nil, errors.New("lvmd.yaml is not loaded yet")
		}
		for _, d := range cfg.DeviceClasses {
			if d.Name != deviceClass && (deviceClass != "" || !d.Default) {
				continue
			}
			if d.Type != lvmd.TypeThin || d.ThinPool == nil {
				return nil, nil
			}
			data, meta := d.ThinPool.Thresholds()
			return &ThinPool{VolumeGroup: d.VolumeGroup, Name: d.ThinPool.Name, DataThreshold: data, MetadataThreshold: meta}, nil
		}
		return nil, errors.New("no such device class in this node's lvmd.yaml")
	}
}

// LVMPools are Pools from this node's LogicalVolumes (their device class), lvmd.yaml (ThinPoolOf) and
// lvm2 (a pool's usage, one `lvm lvs` with a timeout that kills it).
type LVMPools struct {
	Reader     client.Reader
	NodeName   string
	ThinPoolOf ThinPoolFunc
	LVM        lvm.Runner
}

var _ Pools = LVMPools{}

// ThinPool implements Pools.
func (p LVMPools) ThinPool(ctx context.Context, logicalVolume string) (*ThinPool, error) {
	lv := &topolvmv1.LogicalVolume{}
	if err := p.Reader.Get(ctx, types.NamespacedName{Name: logicalVolume}, lv); err != nil {
		return nil, fmt.Errorf("read LogicalVolume %s: %w", logicalVolume, err)
	}
	if lv.Spec.NodeName != p.NodeName {
		return nil, fmt.Errorf("LogicalVolume %s is on node %q, this agent acts for node %q only", logicalVolume, lv.Spec.NodeName, p.NodeName)
	}
	if p.ThinPoolOf == nil {
		return nil, errors.New("no device classes known")
	}
	pool, err := p.ThinPoolOf(lv.Spec.DeviceClass)
	if err != nil {
		return nil, fmt.Errorf("device class %q of LogicalVolume %s: %w", lv.Spec.DeviceClass, logicalVolume, err)
	}
	return pool, nil
}

// usageTimeout bounds one `lvm lvs` of a pool.
const usageTimeout = 20 * time.Second

// Usage implements Pools.
func (p LVMPools) Usage(ctx context.Context, pool ThinPool) (data, metadata float64, err error) {
	r := p.LVM
	if r.Timeout <= 0 || r.Timeout > usageTimeout {
		r.Timeout = usageTimeout
	}
	out, err := r.LVMCmd(ctx, "lvs", "--reportformat", "json", "-o", "lv_name,data_percent,metadata_percent", pool.VolumeGroup+"/"+pool.Name)
	if err != nil {
		return 0, 0, err
	}
	return parsePoolUsage(out, pool.Name)
}

func parsePoolUsage(out []byte, name string) (data, metadata float64, err error) {
	var rep struct {
		Report []struct {
			LV []map[string]string `json:"lv"`
		} `json:"report"`
	}
	if err := json.Unmarshal(out, &rep); err != nil {
		return 0, 0, fmt.Errorf("parse lvs output: %w", err)
	}
	for _, r := range rep.Report {
		for _, row := range r.LV {
			if row["lv_name"] != name {
				continue
			}
			if data, err = lvm.ParsePercent(row["data_percent"]); err == nil {
				metadata, err = lvm.ParsePercent(row["metadata_percent"])
			}
			if err != nil {
				return 0, 0, fmt.Errorf("parse lvs output of thin pool %s: %w", name, err)
			}
			return data, metadata, nil
		}
	}
	return 0, 0, fmt.Errorf("lvs did not report thin pool %s", name)
}
