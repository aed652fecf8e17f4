package bundleserve

import (
	"cmp"
	"slices"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/lvms-dev/lvms/diagnostics/bundle"
)

// builtin is what discovery says about a built-in kind the collector collects, for bundles written before
// the collector recorded discovery.
type builtin struct {
	group, version, resource, kind string
	namespaced                     bool
	shortNames                     []string
}

var builtins = []builtin{
	{"", "v1", "configmaps", "ConfigMap", true, []string{"cm"}},
	{"", "v1", "events", "Event", true, []string{"ev"}},
	{"", "v1", "namespaces", "Namespace", false, []string{"ns"}},
	{"", "v1", "nodes", "Node", false, []string{"no"}},
	{"", "v1", "persistentvolumeclaims", "PersistentVolumeClaim", true, []string{"pvc"}},
	{"", "v1", "persistentvolumes", "PersistentVolume", false, []string{"pv"}},
	{"", "v1", "pods", "Pod", true, []string{"po"}},
	{"apps", "v1", "daemonsets", "DaemonSet", true, []string{"ds"}},
	{"apps", "v1", "deployments", "Deployment", true, []string{"deploy"}},
	{"snapshot.storage.k8s.io", "v1", "volumesnapshotclasses", "VolumeSnapshotClass", false, []string{"vsclass", "vsclasses"}},
	{"storage.k8s.io", "v1", "csidrivers", "CSIDriver", false, nil},
	{"storage.k8s.io", "v1", "csinodes", "CSINode", false, nil},
	{"storage.k8s.io", "v1", "csistoragecapacities", "CSIStorageCapacity", true, nil},
	{"storage.k8s.io", "v1", "storageclasses", "StorageClass", false, []string{"sc"}},
}

var readVerbs = metav1.Verbs{"get", "list", "watch"}

// fallbackDiscovery builds discovery from the built-in table and the kinds of the bundle's objects (their
// apiVersion and kind, the resource and scope they are filed under).
func fallbackDiscovery(objects map[schema.GroupResource][]*unstructured.Unstructured, namespaced map[schema.GroupResource]bool) bundle.Discovery {
	lists := map[schema.GroupVersion][]metav1.APIResource{}
	known := map[schema.GroupResource]bool{}
	for _, b := range builtins {
		gv := schema.GroupVersion{Group: b.group, Version: b.version}
		lists[gv] = append(lists[gv], metav1.APIResource{Name: b.resource, SingularName: strings.ToLower(b.kind), Kind: b.kind,
			Namespaced: b.namespaced, ShortNames: b.shortNames, Verbs: readVerbs})
		known[schema.GroupResource{Group: b.group, Resource: b.resource}] = true
	}
	for gr, objs := range objects {
		if known[gr] || len(objs) == 0 {
			continue
		}
		gv, err := schema.ParseGroupVersion(objs[0].GetAPIVersion())
		if err != nil || gv.Group != gr.Group || objs[0].GetKind() == "" {
			continue
		}
		kind := objs[0].GetKind()
		lists[gv] = append(lists[gv], metav1.APIResource{Name: gr.Resource, SingularName: strings.ToLower(kind), Kind: kind,
			Namespaced: namespaced[gr], Verbs: readVerbs})
	}
	var d bundle.Discovery
	groups := map[string]*metav1.APIGroup{}
	for gv, rs := range lists {
		slices.SortFunc(rs, func(a, b metav1.APIResource) int { return strings.Compare(a.Name, b.Name) })
		d.Resources = append(d.Resources, metav1.APIResourceList{GroupVersion: gv.String(), APIResources: rs})
		g := groups[gv.Group]
		if g == nil {
			g = &metav1.APIGroup{Name: gv.Group}
			groups[gv.Group] = g
		}
		g.Versions = append(g.Versions, metav1.GroupVersionForDiscovery{GroupVersion: gv.String(), Version: gv.Version})
	}
	slices.SortFunc(d.Resources, func(a, b metav1.APIResourceList) int { return strings.Compare(a.GroupVersion, b.GroupVersion) })
	for _, g := range groups {
		// Several versions of one group: the bundle gives no preference, so the newest-sorting one wins.
		slices.SortFunc(g.Versions, func(a, b metav1.GroupVersionForDiscovery) int { return strings.Compare(b.Version, a.Version) })
		g.PreferredVersion = g.Versions[0]
		d.Groups.Groups = append(d.Groups.Groups, *g)
	}
	slices.SortFunc(d.Groups.Groups, func(a, b metav1.APIGroup) int { return cmp.Compare(a.Name, b.Name) })
	return d
}

// apiGroups are the named groups (/apis), without the core group (/api).
func (s *store) apiGroups() metav1.APIGroupList {
	out := metav1.APIGroupList{TypeMeta: s.groups.TypeMeta}
	for _, g := range s.groups.Groups {
		if g.Name != "" {
			out.Groups = append(out.Groups, g)
		}
	}
	return out
}

// group is a named group's discovery (/apis/<group>).
func (s *store) group(name string) (metav1.APIGroup, bool) {
	for _, g := range s.groups.Groups {
		if g.Name == name && name != "" {
			g.Kind, g.APIVersion = "APIGroup", "v1"
			return g, true
		}
	}
	return metav1.APIGroup{}, false
}
