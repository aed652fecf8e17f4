package agent

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/lvms-dev/lvms/nodeagent/desired"
	"github.com/lvms-dev/lvms/nodeagent/lvm"
	"github.com/lvms-dev/lvms/nodeagent/lvmd"
	"github.com/lvms-dev/lvms/nodeagent/status"
	"github.com/lvms-dev/lvms/nodeagent/volumegroup"
)

// ourHeader starts every lvmd.yaml the agent writes; the agent only removes files that start with it.
const ourHeader = "# Written by the LVMS node agent"

// writeLVMD writes lvmd.yaml with every device class whose volume group (and thin pool) exists.
func (a *Agent) writeLVMD(p *pass) status.LVMD {
	cfg := &lvmd.Config{SocketName: p.node.SocketName}
	var waiting []string
	shared := 0
	for _, dc := range p.node.DeviceClasses {
		if vg, ok := p.node.VolumeGroup(dc.VolumeGroup); ok && vg.Shared {
			// The shared driver serves it: lvmd would create LVs without lvmlockd's locks.
			shared++
			continue
		}
		why := classReady(p, dc.VolumeGroup, dc.Thin != nil, poolName(dc.Thin))
		if why != "" {
			waiting = append(waiting, fmt.Sprintf("%s waits for %s", dc.Name, why))
			continue
		}
		c := lvmd.DeviceClass{Name: dc.Name, VolumeGroup: dc.VolumeGroup, Default: dc.Default, SpareGB: dc.SpareGB,
			LVCreateOptions: dc.LVCreateOptions, Type: lvmd.TypeThick}
		if dc.Thin != nil {
			c.Type, c.ThinPool = lvmd.TypeThin, &lvmd.ThinPoolConfig{Name: dc.Thin.Name, OverprovisionRatio: dc.Thin.OverprovisionRatio,
				DataUsageThreshold: new(float64(dc.Thin.DataUsageThreshold)), MetadataUsageThreshold: new(float64(dc.Thin.MetadataUsageThreshold))}
		}
		cfg.DeviceClasses = append(cfg.DeviceClasses, c)
	}
	path := a.opts.LVMDConfigPath
	total := len(p.node.DeviceClasses) - shared
	if len(cfg.DeviceClasses) == 0 {
		if ours(path) {
			if err := lvmd.Remove(path); err != nil {
				return status.LVMD{Reason: status.ReasonWriteFailed, Message: err.Error()}
			}
			a.watcher.Reload()
		}
		if total == 0 && shared > 0 {
			return status.LVMD{OK: true, Reason: status.ReasonNothingToWrite, Message: "the device classes of this node are on shared volume groups, which the shared driver serves, so lvmd.yaml lists none"}
		}
		if total == 0 {
			return status.LVMD{OK: true, Reason: status.ReasonNothingToWrite, Message: "no device class is desired on this node, so lvmd.yaml lists none"}
		}
		return status.LVMD{Reason: status.ReasonPartial, Message: "lvmd.yaml lists no device class yet: " + strings.Join(waiting, "; ")}
	}
	if err := cfg.Validate(); err != nil {
		return status.LVMD{Reason: status.ReasonInvalid, Message: "the device classes do not make a valid lvmd.yaml, so it is not written: " + err.Error()}
	}
	if _, err := lvmd.Write(path, cfg); err != nil {
		return status.LVMD{Reason: status.ReasonWriteFailed, Message: err.Error()}
	}
	a.watcher.Reload()
	if len(waiting) > 0 {
		return status.LVMD{Reason: status.ReasonPartial, Message: fmt.Sprintf("lvmd.yaml lists %d of %d device classes: %s", len(cfg.DeviceClasses), total, strings.Join(waiting, "; "))}
	}
	return status.LVMD{OK: true, Reason: status.ReasonWritten, Message: "lvmd.yaml lists every device class"}
}

func poolName(tp *desired.ThinPool) string {
	if tp == nil {
		return ""
	}
	return tp.Name
}

// classReady says what a device class still waits for, or "".
func classReady(p *pass, vgName string, thin bool, pool string) string {
	vg, ok := p.node.VolumeGroup(vgName)
	if !ok {
		return "volume group " + vgName + ", which is not desired on this node"
	}
	if vg.Deleting {
		return "volume group " + vgName + ", which is being deleted"
	}
	if _, exists := p.obs.Report.VG(vgName); !exists {
		return "volume group " + vgName
	}
	if !thin {
		return ""
	}
	for i, d := range p.node.VolumeGroups {
		if d.Name != vgName || i >= len(p.outcome.VolumeGroups) {
			continue
		}
		for _, tp := range p.outcome.VolumeGroups[i].Pools {
			if tp.LV != nil && (pool == "" || tp.Name == pool) {
				return ""
			}
		}
	}
	return "its thin pool in " + vgName
}

// ours reports whether the agent wrote the file.
func ours(path string) bool {
	data, err := os.ReadFile(path)
	return err == nil && bytes.HasPrefix(data, []byte(ourHeader))
}

// checkExternalLVMD validates the host's lvmd.yaml (ExternalConfiguration) against the LVM state.
func (a *Agent) checkExternalLVMD(rep *lvm.Report) (status.LVMD, *status.External) {
	path := a.watcher.Path()
	cfg, err := a.watcher.Current()
	var invalid *lvmd.InvalidError
	switch {
	case errors.Is(err, os.ErrNotExist):
		return status.LVMD{Reason: status.ReasonMissing, Message: fmt.Sprintf("configurationPolicy is ExternalConfiguration but %s does not exist on this node; create it (TopoLVM lvmd.yaml format) and LVMS reads it without a restart", path)}, &status.External{}
	case errors.As(err, &invalid):
		return status.LVMD{Reason: status.ReasonInvalid, Message: err.Error() + "; fix the file and LVMS reads it again without a restart"}, &status.External{}
	case err != nil:
		return status.LVMD{Reason: status.ReasonInvalid, Message: err.Error()}, &status.External{}
	}
	// Keys nothing reads are TopoLVM's to ignore too: said, never fatal (a typo shows up next to the error
	// it causes).
	unknown := ""
	if len(cfg.Unknown) > 0 {
		unknown = "; keys nothing reads (TopoLVM ignores them too): " + strings.Join(cfg.Unknown, "; ")
	}
	if err := cfg.Validate(); err != nil {
		return status.LVMD{Reason: status.ReasonInvalid, Message: fmt.Sprintf("%s is not a valid lvmd configuration: %v%s", path, err, unknown)}, &status.External{}
	}
	ext := &status.External{Config: cfg, Problems: cfg.CheckLVM(rep)}
	return status.LVMD{OK: true, Reason: status.ReasonValid, Message: fmt.Sprintf("the host lvmd.yaml (%s) is valid and lists %d device classes%s", path, len(cfg.DeviceClasses), unknown)}, ext
}

var _ volumegroup.WipeRecords = (*apiWipes)(nil)
