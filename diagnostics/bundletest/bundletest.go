package bundletest

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"
	"sigs.k8s.io/yaml"

	"github.com/lvms-dev/lvms/api"
	"github.com/lvms-dev/lvms/diagnostics/bundle"
	"github.com/lvms-dev/lvms/nodeagent/diagnostics"
)

// At is the time of every hand-made bundle.
var At = time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)

// State is a bundle before it is written.
type State struct {
	Manifest bundle.Manifest
	Objects  []client.Object
	// Views are the node agents' views by node; Fetched and RoundTrip how the collector got them.
	Views     map[string]*diagnostics.View
	Fetched   map[string]time.Time
	RoundTrip time.Duration
	// Extra files (path -> content), written as they are.
	Extra map[string]string
}

// resources maps a kind to its group, plural resource name and scope.
var resources = map[string]struct {
	resource   string
	namespaced bool
}{
	"Node": {"nodes", false}, "Pod": {"pods", true}, "Event": {"events", true}, "ConfigMap": {"configmaps", true},
	"PersistentVolume": {"persistentvolumes", false}, "PersistentVolumeClaim": {"persistentvolumeclaims", true},
	"StorageClass": {"storageclasses", false}, "CSIDriver": {"csidrivers", false}, "CSINode": {"csinodes", false},
	"CSIStorageCapacity": {"csistoragecapacities", true}, "VolumeSnapshotClass": {"volumesnapshotclasses", false},
	"LVMNodeSet": {"lvmnodesets", true}, "LVMNode": {"lvmnodes", true}, "LVMCluster": {"lvmclusters", true},
	"LVMVolumeGroup": {"lvmvolumegroups", true}, "LVMVolumeGroupNodeStatus": {"lvmvolumegroupnodestatuses", true},
	"LogicalVolume": {"logicalvolumes", false}, "DaemonSet": {"daemonsets", true}, "Deployment": {"deployments", true},
}

// Files lays the state out as a bundle.
func (s *State) Files(t testing.TB) map[string][]byte {
	t.Helper()
	scheme := api.NewScheme()
	files := map[string][]byte{}
	events := map[string][]any{}
	for _, o := range s.Objects {
		gvk, err := gvkOf(scheme, o)
		if err != nil {
			t.Fatal(err)
		}
		u, err := runtime.DefaultUnstructuredConverter.ToUnstructured(o)
		if err != nil {
			t.Fatalf("%T: %v", o, err)
		}
		u["apiVersion"], u["kind"] = gvk.GroupVersion().String(), gvk.Kind
		if gvk.Kind == "Event" {
			events[o.GetNamespace()] = append(events[o.GetNamespace()], u)
			continue
		}
		r, ok := resources[gvk.Kind]
		if !ok {
			t.Fatalf("bundletest does not know where a %s goes", gvk.Kind)
		}
		ns := o.GetNamespace()
		if !r.namespaced {
			ns = ""
		}
		p, err := bundle.ObjectPath(gvk.Group, r.resource, ns, o.GetName())
		if err != nil {
			t.Fatal(err)
		}
		files[p] = mustYAML(t, u)
	}
	for ns, items := range events {
		p, _ := bundle.EventsPath(ns)
		files[p] = mustYAML(t, map[string]any{"apiVersion": "v1", "kind": "List", "items": items})
	}
	for node, v := range s.Views {
		fetched, ok := s.Fetched[node]
		if !ok {
			fetched = s.Manifest.Started
		}
		nf, err := bundle.NodeFiles(v, "lvms/lvms-node-agent-"+node, fetched, s.RoundTrip)
		if err != nil {
			t.Fatal(err)
		}
		for f, data := range nf {
			p, _ := bundle.NodePath(node, f)
			files[p] = data
		}
	}
	for p, c := range s.Extra {
		files[p] = []byte(c)
	}
	m, err := json.MarshalIndent(s.Manifest, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	files[bundle.FileManifest] = m
	files[bundle.FileVersion] = bundle.VersionFile(s.Manifest.Version)
	return files
}

func gvkOf(scheme *runtime.Scheme, o client.Object) (schema.GroupVersionKind, error) {
	if gvk := o.GetObjectKind().GroupVersionKind(); gvk.Kind != "" {
		return gvk, nil
	}
	return apiutil.GVKForObject(o, scheme)
}

func mustYAML(t testing.TB, v any) []byte {
	t.Helper()
	b, err := yaml.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// Bundle decodes the state's files as a bundle read from disk would be.
func (s *State) Bundle(t testing.TB) *bundle.Bundle {
	t.Helper()
	b, err := bundle.Decode(bundle.NewFiles("hand-made", s.Files(t)))
	if err != nil {
		t.Fatal(err)
	}
	if len(b.Problems) > 0 {
		t.Fatalf("hand-made bundle has problems: %v", b.Problems)
	}
	return b
}

// WriteTarGz writes the state as a bundle file at path.
func (s *State) WriteTarGz(t testing.TB, path string) {
	t.Helper()
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	w, err := bundle.NewTarWriter(f, "lvms-bundle-"+filepath.Base(path), 0, s.Manifest.Started)
	if err != nil {
		t.Fatal(err)
	}
	files := s.Files(t)
	for _, name := range sortedKeys(files) {
		var werr error
		if name == bundle.FileManifest || name == bundle.FileVersion {
			werr = w.WriteMeta(name, files[name])
		} else {
			werr = w.WriteFile(name, files[name])
		}
		if werr != nil {
			t.Fatal(werr)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
}

// Find returns the object of type T with the given name.
func Find[T client.Object](s *State, name string) T {
	for _, o := range s.Objects {
		if x, ok := o.(T); ok && o.GetName() == name {
			return x
		}
	}
	var zero T
	panic(fmt.Sprintf("bundletest: no %T named %s", zero, name))
}

// Remove drops the object of type T with the given name.
func Remove[T client.Object](s *State, name string) {
	for i, o := range s.Objects {
		if _, ok := o.(T); ok && o.GetName() == name {
			s.Objects = append(s.Objects[:i], s.Objects[i+1:]...)
			return
		}
	}
	var zero T
	panic(fmt.Sprintf("bundletest: no %T named %s", zero, name))
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}
