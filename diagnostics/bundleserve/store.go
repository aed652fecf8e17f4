package bundleserve

import (
	"cmp"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/lvms-dev/lvms/diagnostics/bundle"
)

// resource is one resource the server answers for: its discovery entry, the bundle's objects of it (in
// namespace and name order, the API server's order) and the Table recorded for them, if any.
type resource struct {
	gv      schema.GroupVersion
	api     metav1.APIResource
	objects []*unstructured.Unstructured
	table   *bundle.Table
	rows    map[string]int // namespace/name -> index in table.Rows
	// collected is false for resources the collector does not collect: their lists are empty because the
	// bundle does not hold them, which the server says in a warning.
	collected bool
}

// store is the bundle as the server reads it.
type store struct {
	name  string
	files *bundle.Files
	at    time.Time // the bundle's time: ages are relative to it
	// version is the API server's gitVersion at collection.
	version string
	groups  metav1.APIGroupList
	// lists are the resource lists by group version ("v1", "apps/v1").
	lists map[string]*metav1.APIResourceList
	// byGVR finds a resource by group, version and plural name.
	byGVR map[schema.GroupVersionResource]*resource
	// problems are files the server could not read; the rest is served.
	problems []string
}

// objectFile mirrors the bundle reader: YAML under the resource directories, not logs.
func objectFile(p string) bool {
	return strings.HasSuffix(p, ".yaml") && !strings.Contains(p, "/logs/") &&
		(strings.HasPrefix(p, bundle.DirClusterScoped+"/") || strings.HasPrefix(p, bundle.DirNamespaces+"/"))
}

// pathResource is the group and resource an object file is filed under, and whether it is namespaced.
func pathResource(p string) (schema.GroupResource, bool, bool) {
	parts := strings.Split(p, "/")
	var gr schema.GroupResource
	switch {
	case parts[0] == bundle.DirClusterScoped && len(parts) == 4:
		gr = schema.GroupResource{Group: parts[1], Resource: parts[2]}
	case parts[0] == bundle.DirNamespaces && len(parts) == 5:
		gr = schema.GroupResource{Group: parts[2], Resource: parts[3]}
	case parts[0] == bundle.DirNamespaces && len(parts) == 4 && parts[2] == "core" && parts[3] == "events.yaml":
		gr = schema.GroupResource{Resource: "events"}
	default:
		return gr, false, false
	}
	if gr.Group == "core" {
		gr.Group = ""
	}
	return gr, parts[0] == bundle.DirNamespaces, true
}

// newStore indexes a bundle.
func newStore(b *bundle.Bundle) *store {
	s := &store{name: b.Files.Source, files: b.Files, at: b.Manifest.Started, version: b.Manifest.ServerVersion,
		lists: map[string]*metav1.APIResourceList{}, byGVR: map[schema.GroupVersionResource]*resource{}}
	objects := map[schema.GroupResource][]*unstructured.Unstructured{}
	namespaced := map[schema.GroupResource]bool{}
	for _, p := range b.Files.Names() {
		if !objectFile(p) {
			continue
		}
		gr, ns, ok := pathResource(p)
		if !ok {
			continue
		}
		data, _ := b.Files.Get(p)
		objs, err := bundle.DecodeUnstructured(data)
		if err != nil {
			s.problems = append(s.problems, fmt.Sprintf("%s: %v", p, err))
			continue
		}
		objects[gr] = append(objects[gr], objs...)
		namespaced[gr] = ns
	}
	disc, ok := readDiscovery(b.Files)
	if !ok {
		disc = fallbackDiscovery(objects, namespaced)
	}
	s.groups = disc.Groups
	s.groups.Kind, s.groups.APIVersion = "APIGroupList", "v1"
	collected := collectedResources(b.Manifest)
	for i := range disc.Resources {
		l := &disc.Resources[i]
		l.Kind, l.APIVersion = "APIResourceList", "v1"
		s.lists[l.GroupVersion] = l
		gv, err := schema.ParseGroupVersion(l.GroupVersion)
		if err != nil {
			continue
		}
		for _, ar := range l.APIResources {
			if strings.Contains(ar.Name, "/") {
				continue
			}
			gr := schema.GroupResource{Group: gv.Group, Resource: ar.Name}
			r := &resource{gv: gv, api: ar, objects: objects[gr], collected: collected(gr) || len(objects[gr]) > 0}
			slices.SortStableFunc(r.objects, func(a, b *unstructured.Unstructured) int {
				return cmp.Or(strings.Compare(a.GetNamespace(), b.GetNamespace()), strings.Compare(a.GetName(), b.GetName()))
			})
			r.table, r.rows = readTable(b.Files, gr)
			s.byGVR[gv.WithResource(ar.Name)] = r
		}
	}
	return s
}

func readDiscovery(files *bundle.Files) (bundle.Discovery, bool) {
	var d bundle.Discovery
	data, ok := files.Get(bundle.FileDiscovery)
	if !ok || json.Unmarshal(data, &d) != nil || len(d.Resources) == 0 {
		return d, false
	}
	return d, true
}

func readTable(files *bundle.Files, gr schema.GroupResource) (*bundle.Table, map[string]int) {
	p, err := bundle.TablePath(gr.Group, gr.Resource)
	if err != nil {
		return nil, nil
	}
	data, ok := files.Get(p)
	if !ok {
		return nil, nil
	}
	var t bundle.Table
	if json.Unmarshal(data, &t) != nil || len(t.Columns) == 0 {
		return nil, nil
	}
	rows := map[string]int{}
	for i, r := range t.Rows {
		if len(r.Cells) != len(t.Columns) {
			return nil, nil
		}
		rows[r.Namespace+"/"+r.Name] = i
	}
	return &t, rows
}

// collectedResources says which resources the bundle's collectors listed (as "resources/<resource>[.<group>]
// [ (label)]", and "events").
func collectedResources(m bundle.Manifest) func(schema.GroupResource) bool {
	seen := map[schema.GroupResource]bool{}
	for _, c := range m.Collectors {
		name, _, _ := strings.Cut(c.Name, " ")
		if name == "events" {
			seen[schema.GroupResource{Resource: "events"}] = true
		}
		rest, ok := strings.CutPrefix(name, "resources/")
		if !ok {
			continue
		}
		res, group, _ := strings.Cut(rest, ".")
		seen[schema.GroupResource{Group: group, Resource: res}] = true
	}
	return func(gr schema.GroupResource) bool { return seen[gr] }
}
