package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strings"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/lvms-dev/lvms/nodeagent/desired"
	"github.com/lvms-dev/lvms/nodeagent/lvmd"
	"github.com/lvms-dev/lvms/nodeagent/volumegroup"
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
// restarts and upgrades of the agent and are visible to the administrator, and a copy in a file on the node
// (next to lvmd.yaml), so that deleting and recreating the API object does not arm a wipe again. A device is
// wiped when neither has a record; a record that cannot be read stops every wipe of the volume group.
//
// A record maps each device path to the time its wipe began; "<time> started" is a wipe begun and not
// confirmed, which counts as a wipe (an agent that stopped during a wipe never wipes the device again).
type apiWipes struct {
	a  *Agent
	in *inputs
}

// startedSuffix marks a wipe recorded before it ran and not yet confirmed.
const startedSuffix = " started"

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

// parseRecords reads a record; anything it cannot read is an error, never "no record".
func parseRecords(raw string) (map[string]volumegroup.WipeRecord, error) {
	var m map[string]string
	if err := json.Unmarshal([]byte(raw), &m); err != nil {
		return nil, fmt.Errorf("not a JSON object of device paths to times: %w", err)
	}
	out := map[string]volumegroup.WipeRecord{}
	for path, v := range m {
		at, started := strings.CutSuffix(v, startedSuffix)
		t, err := time.Parse(time.RFC3339, at)
		if err != nil {
			return nil, fmt.Errorf("device %s: %q is not a time: %w", path, v, err)
		}
		out[path] = volumegroup.WipeRecord{At: t, Done: !started}
	}
	return out, nil
}

func formatRecords(records map[string]volumegroup.WipeRecord) (string, error) {
	m := map[string]string{}
	for p, r := range records {
		v := r.At.UTC().Format(time.RFC3339)
		if !r.Done {
			v += startedSuffix
		}
		m[p] = v
	}
	raw, err := json.Marshal(m) // encoding/json sorts map keys
	return string(raw), err
}

// Wiped implements volumegroup.WipeRecords.
func (w *apiWipes) Wiped(vg, path string) (volumegroup.WipeRecord, bool, error) {
	local, err := w.localRecords(vg)
	if err != nil {
		return volumegroup.WipeRecord{}, false, err
	}
	if r, ok := local[path]; ok {
		return r, true, nil
	}
	obj, key := w.target(vg)
	if obj == nil {
		return volumegroup.WipeRecord{}, false, nil
	}
	if _, legacy := obj.GetAnnotations()[LegacyWipedAnnotationPrefix+w.a.opts.NodeName]; legacy {
		return volumegroup.WipeRecord{Done: true}, true, nil
	}
	raw, ok := obj.GetAnnotations()[key]
	if !ok {
		return volumegroup.WipeRecord{}, false, nil
	}
	records, err := parseRecords(raw)
	if err != nil {
		return volumegroup.WipeRecord{}, false, fmt.Errorf("annotation %s on %s: %w", key, obj.GetName(), err)
	}
	r, ok := records[path]
	return r, ok, nil
}

// Begin implements volumegroup.WipeRecords.
func (w *apiWipes) Begin(ctx context.Context, vg, path string, at time.Time) error {
	return w.write(ctx, vg, path, volumegroup.WipeRecord{At: at})
}

// Record implements volumegroup.WipeRecords: it patches the annotation before the device is used.
func (w *apiWipes) Record(ctx context.Context, vg, path string, at time.Time) error {
	return w.write(ctx, vg, path, volumegroup.WipeRecord{At: at, Done: true})
}

// write stores a record on the node first (it survives the API object), then on the API object.
func (w *apiWipes) write(ctx context.Context, vg, path string, r volumegroup.WipeRecord) error {
	if err := w.writeLocal(vg, path, r); err != nil {
		return err
	}
	obj, key := w.target(vg)
	if obj == nil {
		return fmt.Errorf("no API object holds volume group %s", vg)
	}
	records := map[string]volumegroup.WipeRecord{}
	if raw, ok := obj.GetAnnotations()[key]; ok {
		var err error
		if records, err = parseRecords(raw); err != nil {
			return fmt.Errorf("annotation %s on %s: %w", key, obj.GetName(), err)
		}
	}
	records[path] = r
	raw, err := formatRecords(records)
	if err != nil {
		return err
	}
	orig := obj.DeepCopyObject().(client.Object)
	ann := obj.GetAnnotations()
	if ann == nil {
		ann = map[string]string{}
	}
	ann[key] = raw
	obj.SetAnnotations(ann)
	if err := w.a.c.Patch(ctx, obj, client.MergeFrom(orig)); err != nil {
		return fmt.Errorf("record the wipe of %s on %s: %w", path, obj.GetName(), err)
	}
	return nil
}

// localFile is the node's copy of the records: one JSON object per volume group.
func (w *apiWipes) localFile() string { return w.a.opts.WipeRecordFile }

func (w *apiWipes) readLocal() (map[string]string, error) {
	data, err := os.ReadFile(w.localFile())
	if errors.Is(err, fs.ErrNotExist) {
		return map[string]string{}, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read the node's wipe records %s: %w", w.localFile(), err)
	}
	all := map[string]string{}
	if err := json.Unmarshal(data, &all); err != nil {
		return nil, fmt.Errorf("the node's wipe records %s are not a JSON object of volume groups: %w", w.localFile(), err)
	}
	return all, nil
}

func (w *apiWipes) localRecords(vg string) (map[string]volumegroup.WipeRecord, error) {
	all, err := w.readLocal()
	if err != nil {
		return nil, err
	}
	raw, ok := all[vg]
	if !ok {
		return map[string]volumegroup.WipeRecord{}, nil
	}
	records, err := parseRecords(raw)
	if err != nil {
		return nil, fmt.Errorf("the node's wipe records %s, volume group %s: %w", w.localFile(), vg, err)
	}
	return records, nil
}

func (w *apiWipes) writeLocal(vg, path string, r volumegroup.WipeRecord) error {
	all, err := w.readLocal()
	if err != nil {
		return err
	}
	records, err := w.localRecords(vg)
	if err != nil {
		return err
	}
	records[path] = r
	if all[vg], err = formatRecords(records); err != nil {
		return err
	}
	data, err := json.MarshalIndent(all, "", "  ")
	if err != nil {
		return err
	}
	if err := lvmd.WriteFileAtomic(w.localFile(), append(data, '\n')); err != nil {
		return fmt.Errorf("write the node's wipe records %s: %w", w.localFile(), err)
	}
	return nil
}
