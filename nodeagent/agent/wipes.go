package agent

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/lvms-dev/lvms/nodeagent/desired"
)

// Annotations that record forced wipes.
const (
	// WipedAnnotationPrefix + <vg> on an LVMNode, or + <node> on an LVMVolumeGroup, holds a JSON object
	// mapping each wiped device path to the time it was wiped.
	WipedAnnotationPrefix = "wiped.lvm.topolvm.io/"
	// LegacyWipedAnnotationPrefix + <node> is lvm-operator's marker on an LVMVolumeGroup: its devices on
	// that node were wiped. LVMS never wipes them again either.
	LegacyWipedAnnotationPrefix = "wiped.devices.lvms.openshift.io/"
)

// apiWipes keeps the wipe records on the API object the volume group comes from, so that they survive
// restarts and upgrades of the agent and are visible to the administrator.
type apiWipes struct {
	a  *Agent
	in *inputs
}

func (w *apiWipes) target(vg string) (client.Object, string) {
	d, ok := w.in.desired.VolumeGroup(vg)
	if !ok {
		return nil, ""
	}
	obj := w.in.sourceObject(d)
	if obj == nil {
		return nil, ""
	}
	if d.Source == desired.SourceLVMNode {
		return obj, WipedAnnotationPrefix + shortName(vg)
	}
	return obj, WipedAnnotationPrefix + shortName(w.a.opts.NodeName)
}

func readRecords(obj client.Object, key string) map[string]time.Time {
	out := map[string]time.Time{}
	raw, ok := obj.GetAnnotations()[key]
	if !ok {
		return out
	}
	var m map[string]string
	if err := json.Unmarshal([]byte(raw), &m); err != nil {
		return out
	}
	for path, at := range m {
		t, err := time.Parse(time.RFC3339, at)
		if err == nil {
			out[path] = t
		}
	}
	return out
}

// Wiped implements volumegroup.WipeRecords.
func (w *apiWipes) Wiped(vg, path string) (time.Time, bool) {
	obj, key := w.target(vg)
	if obj == nil {
		return time.Time{}, false
	}
	if _, legacy := obj.GetAnnotations()[LegacyWipedAnnotationPrefix+w.a.opts.NodeName]; legacy {
		return time.Time{}, true
	}
	at, ok := readRecords(obj, key)[path]
	return at, ok
}

// Record implements volumegroup.WipeRecords: it patches the annotation before the device is used.
func (w *apiWipes) Record(ctx context.Context, vg, path string, at time.Time) error {
	obj, key := w.target(vg)
	if obj == nil {
		return fmt.Errorf("no API object holds volume group %s", vg)
	}
	records := readRecords(obj, key)
	records[path] = at.UTC()
	m := map[string]string{}
	for p, t := range records {
		m[p] = t.UTC().Format(time.RFC3339)
	}
	raw, err := json.Marshal(m) // encoding/json sorts map keys
	if err != nil {
		return err
	}
	orig := obj.DeepCopyObject().(client.Object)
	ann := obj.GetAnnotations()
	if ann == nil {
		ann = map[string]string{}
	}
	ann[key] = string(raw)
	obj.SetAnnotations(ann)
	if err := w.a.c.Patch(ctx, obj, client.MergeFrom(orig)); err != nil {
		return fmt.Errorf("record the wipe of %s on %s: %w", path, obj.GetName(), err)
	}
	return nil
}
