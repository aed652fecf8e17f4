package console

import (
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
)

// Events returns the events about LVMS objects, the nodes with LVMS state and LVMS volumes, newest first.
func Events(s *Snapshot) []EventView {
	x := newIndex(s)
	var out []EventView
	for i := range s.Events {
		if e := &s.Events[i]; x.relevant(e) {
			out = append(out, eventView(e))
		}
	}
	return out
}

// nodeEvents returns the events about one node and its per-node objects and volumes.
func (x *index) nodeEvents(node string) []EventView {
	lvs := map[string]bool{}
	for _, lv := range x.lvsByNode[node] {
		lvs[lv.Name] = true
	}
	var out []EventView
	for i := range x.s.Events {
		e := &x.s.Events[i]
		o := e.InvolvedObject
		switch {
		case o.Name == node && (o.Kind == "Node" || o.Kind == "LVMNode" || o.Kind == "LVMVolumeGroupNodeStatus"):
		case o.Kind == "LogicalVolume" && lvs[o.Name]:
		default:
			continue
		}
		out = append(out, eventView(e))
	}
	return out
}

// relevant reports whether an event is about something the console shows.
func (x *index) relevant(e *corev1.Event) bool {
	o := e.InvolvedObject
	if strings.HasPrefix(o.APIVersion, "lvm.topolvm.io/") || strings.HasPrefix(o.APIVersion, "topolvm.io/") ||
		strings.HasPrefix(o.APIVersion, "topolvm.cybozu.com/") {
		return true
	}
	switch o.Kind {
	case "Node":
		return len(x.lvmNodes[o.Name]) > 0 || len(x.nodeStatuses[o.Name]) > 0
	case "PersistentVolumeClaim":
		for i := range x.s.PVCs {
			c := &x.s.PVCs[i]
			if c.Namespace == o.Namespace && c.Name == o.Name && c.Spec.StorageClassName != nil {
				if sc, ok := x.scs[*c.Spec.StorageClassName]; ok && isLVMSProvisioner(sc.Provisioner) {
					return true
				}
			}
		}
	}
	return false
}

func isLVMSProvisioner(p string) bool { return slices.Contains(lvmsProvisioners, p) }

func eventView(e *corev1.Event) EventView {
	o := e.InvolvedObject
	v := EventView{Time: eventTime(*e), Type: e.Type, Reason: e.Reason, Message: e.Message, Count: eventCount(e),
		Object: Ref{API: o.APIVersion, Kind: o.Kind, Namespace: o.Namespace, Name: o.Name}, Health: HealthInfo}
	if e.Type == corev1.EventTypeWarning {
		v.Health = HealthWarning
	}
	return v
}

// eventCount is how often the event happened, as kubectl counts it: an event written through the
// events.k8s.io API (controller-runtime's recorder) keeps its count in series (from the second
// occurrence) and leaves the core count 0; an event with neither happened once.
func eventCount(e *corev1.Event) int32 {
	n := e.Count
	if e.Series != nil && e.Series.Count > n {
		n = e.Series.Count
	}
	return max(n, 1)
}
