package lvm

import (
	"bufio"
	"bytes"
	"context"
	"slices"
	"strings"
)

// Device-mapper targets the agent needs for some device classes.
const (
	TargetThinPool = "thin-pool"
	TargetThin     = "thin"
	TargetSnapshot = "snapshot"
	TargetRAID     = "raid"
	TargetLinear   = "linear"
	TargetStriped  = "striped"
)

// targetModule is the kernel module that provides a target, for messages and for loading it.
var targetModule = map[string]string{
	TargetThinPool: "dm-thin-pool",
	TargetThin:     "dm-thin-pool",
	TargetSnapshot: "dm-snapshot",
	TargetRAID:     "dm-raid",
}

// ModuleFor returns the kernel module providing a device-mapper target, or "".
func ModuleFor(target string) string { return targetModule[target] }

// Capabilities says what the kernel's device-mapper can do.
type Capabilities struct {
	// DeviceMapper is false when the kernel has no device-mapper at all (no LV can be activated).
	DeviceMapper bool
	// Reason explains DeviceMapper false.
	Reason string
	// Targets the kernel provides, sorted.
	Targets []string
	// MetadataOnly is true when lvm2 is configured never to activate a volume (global/activation = 0, as
	// on lvms local's simulated nodes): linear and striped volumes are then made in the metadata alone and
	// need no target, while a thin pool still does (lvcreate activates it to format it).
	MetadataOnly bool
}

// Has reports whether every target is available.
func (c Capabilities) Has(targets ...string) bool { return len(c.Missing(targets...)) == 0 }

// Missing returns the targets of the list the kernel does not provide, in list order.
func (c Capabilities) Missing(targets ...string) []string {
	var out []string
	for _, t := range targets {
		if c.MetadataOnly && (t == TargetLinear || t == TargetStriped) {
			continue
		}
		if !c.DeviceMapper || !slices.Contains(c.Targets, t) {
			out = append(out, t)
		}
	}
	return out
}

// ParseTargets parses `dmsetup targets` ("thin-pool        v1.23.0" per line).
func ParseTargets(out []byte) []string {
	var targets []string
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) > 0 {
			targets = append(targets, f[0])
		}
	}
	slices.Sort(targets)
	return slices.Compact(targets)
}

// DetectCapabilities asks device-mapper which targets it has. A target that is not loaded yet is loaded
// with modprobe first (lvm2 would do the same on first use), so that "missing" means the kernel cannot
// provide it. It never fails: what cannot be detected is reported in the result.
func (r Runner) DetectCapabilities(ctx context.Context, want ...string) Capabilities {
	out, err := r.Run(ctx, "dmsetup", "targets")
	if err != nil {
		reason := err.Error()
		if ce, ok := AsCommandError(err); ok {
			reason = firstLines(ce.Stderr, 1)
		}
		caps := Capabilities{Reason: "device-mapper is not available in this kernel (dmsetup targets: " + reason + ")"}
		// Asked only without device-mapper: with it, activation is on in every real deployment.
		if out, err := r.Run(ctx, "lvmconfig", "global/activation"); err == nil && strings.TrimSpace(string(out)) == "activation=0" {
			caps.MetadataOnly = true
		}
		return caps
	}
	caps := Capabilities{DeviceMapper: true, Targets: ParseTargets(out)}
	var load []string
	for _, t := range caps.Missing(want...) {
		if m := ModuleFor(t); m != "" && !slices.Contains(load, m) {
			load = append(load, m)
		}
	}
	if len(load) == 0 {
		return caps
	}
	for _, m := range load {
		_, _ = r.Run(ctx, "modprobe", m) // failure shows as a still missing target below
	}
	if out, err := r.Run(ctx, "dmsetup", "targets"); err == nil {
		caps.Targets = ParseTargets(out)
	}
	return caps
}
