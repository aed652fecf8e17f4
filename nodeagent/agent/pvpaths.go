package agent

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// persistentVolumePaths maps the device paths PersistentVolumes use directly on this node (local volumes,
// hostPath disks of VMs) to a volume's name: those devices are someone's data, never taken or wiped. It
// reads the API server directly, a page at a time, instead of caching every PV of the cluster on every node.
func (a *Agent) persistentVolumePaths(ctx context.Context) (map[string]string, error) {
	out := map[string]string{}
	list := &corev1.PersistentVolumeList{}
	for cont := ""; ; {
		if err := a.reader.List(ctx, list, client.Limit(500), client.Continue(cont)); err != nil {
			return nil, fmt.Errorf("list PersistentVolumes (to leave the devices they use alone): %w", err)
		}
		for i := range list.Items {
			pv := &list.Items[i]
			if path := devicePath(pv); path != "" && onNode(pv, a.opts.NodeName) {
				out[path] = pv.Name
			}
		}
		if cont = list.Continue; cont == "" {
			return out, nil
		}
	}
}

func devicePath(pv *corev1.PersistentVolume) string {
	switch {
	case pv.Spec.Local != nil:
		return pv.Spec.Local.Path
	case pv.Spec.HostPath != nil:
		return pv.Spec.HostPath.Path
	}
	return ""
}

// onNode: a PV whose node affinity names hosts applies only to those; one without applies everywhere.
func onNode(pv *corev1.PersistentVolume, node string) bool {
	if pv.Spec.NodeAffinity == nil || pv.Spec.NodeAffinity.Required == nil {
		return true
	}
	for _, term := range pv.Spec.NodeAffinity.Required.NodeSelectorTerms {
		for _, e := range term.MatchExpressions {
			if e.Key == corev1.LabelHostname && e.Operator == corev1.NodeSelectorOpIn {
				for _, v := range e.Values {
					if v == node {
						return true
					}
				}
				return false
			}
		}
	}
	return true
}
