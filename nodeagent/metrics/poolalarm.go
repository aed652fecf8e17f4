package metrics

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"

	"github.com/lvms-dev/lvms/nodeagent/lvmd"
	"github.com/lvms-dev/lvms/nodeagent/lvmdapi"
)

// Thin pool usage events: NearlyFullMargin points below a threshold the pool is nearly full, at the
// threshold it is full (lvmd places no new volume on it). A level is left only HysteresisPoints below
// where it starts, so a pool hovering at a boundary is announced once, not on every Watch message.
const (
	ReasonThinPoolNearlyFull = "ThinPoolNearlyFull"
	ReasonThinPoolFull       = "ThinPoolFull"
	NearlyFullMargin         = 10.0
	HysteresisPoints         = 2.0
)

// Usage levels of a thin pool's data or metadata.
const (
	levelOK = iota
	levelNearlyFull
	levelFull
)

// level is the usage level of used (percent) for a threshold, given the level it was at: a higher level
// is entered at its boundary, a lower one only HysteresisPoints below the boundary of the current one.
func level(used, threshold float64, current int) int {
	nearly := threshold - NearlyFullMargin
	raw := levelOK
	switch {
	case used >= threshold:
		raw = levelFull
	case used >= nearly:
		raw = levelNearlyFull
	}
	if raw >= current {
		return raw
	}
	// Falling: stay until the usage is clearly below the current level's boundary.
	boundary := threshold
	if current == levelNearlyFull {
		boundary = nearly
	}
	if used > boundary-HysteresisPoints {
		return current
	}
	return raw
}

// poolAlarms remembers each pool's levels (by device class and "data"/"metadata") between Watch messages.
type poolAlarms map[string]int

// observe moves a pool's level and returns the event reason for a rise ("" otherwise): a pool that
// jumps from OK to full is announced as full only.
func (a poolAlarms) observe(key string, used, threshold float64) string {
	was := a[key]
	now := level(used, threshold, was)
	a[key] = now
	if now <= was {
		return ""
	}
	if now == levelFull {
		return ReasonThinPoolFull
	}
	return ReasonThinPoolNearlyFull
}

// thresholds are a device class's usage thresholds and its pool's name, from lvmd.yaml (the defaults and
// no name when the configuration cannot be read, for example with a remote lvmd).
func thresholds(config lvmdapi.ConfigFunc, deviceClass string) (data, metadata float64, pool string) {
	var tp *lvmd.ThinPoolConfig
	if config != nil {
		if cfg, err := config(); err == nil && cfg != nil {
			if dc, ok := cfg.DeviceClass(deviceClass); ok && dc.ThinPool != nil {
				tp, pool = dc.ThinPool, dc.VolumeGroup+"/"+dc.ThinPool.Name
			}
		}
	}
	data, metadata = tp.Thresholds()
	return data, metadata, pool
}

// nodeRef is the Node as kubelet names it in its events (UID = name), so `kubectl describe node` lists
// the pool events beside kubelet's.
func nodeRef(node string) *corev1.ObjectReference {
	return &corev1.ObjectReference{APIVersion: "v1", Kind: "Node", Name: node, UID: types.UID(node)}
}

// poolEvent records a rise of a pool's data or metadata usage as a Warning event on the node.
func poolEvent(rec events.EventRecorder, node, deviceClass, pool, kind, reason string, used, threshold float64) {
	what := fmt.Sprintf("the thin pool of device class %q", deviceClass)
	if pool != "" {
		what = fmt.Sprintf("thin pool %s (device class %q)", pool, deviceClass)
	}
	var state string
	if reason == ReasonThinPoolFull {
		state = fmt.Sprintf("is past its %s usage threshold: %.1f%% used, threshold %g%%. New volumes are refused on it; existing volumes keep working", kind, used, threshold)
	} else {
		state = fmt.Sprintf("is nearly at its %s usage threshold: %.1f%% used, threshold %g%%. At the threshold new volumes are refused on it", kind, used, threshold)
	}
	rec.Eventf(nodeRef(node), nil, corev1.EventTypeWarning, reason, "CheckThinPool",
		"node %s: %s %s. Extend the pool (add a device to its volume group), free space in its volumes (fstrim, delete unused volumes and snapshots) or raise the device class's %sUsageThreshold",
		node, what, state, kind)
}
