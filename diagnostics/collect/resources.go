package collect

import (
	"cmp"
	"context"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"

	authnv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/yaml"

	"github.com/lvms-dev/lvms/api/topolvm/driver"
	topolvmv1 "github.com/lvms-dev/lvms/api/topolvm/v1"
	"github.com/lvms-dev/lvms/console"
	"github.com/lvms-dev/lvms/diagnostics/bundle"
	"github.com/lvms-dev/lvms/operator/names"
)

// LVMSGroups are the API groups whose every kind is collected.
var LVMSGroups = []string{"lvm.topolvm.io", topolvmv1.GroupName, topolvmv1.LegacyGroupName}

// LVMSDrivers are the CSI drivers (and provisioners) whose volumes, claims and capacities are collected.
var LVMSDrivers = driver.KnownDrivers()

// NotServedSnapshotClasses is the reason recorded when the cluster has no VolumeSnapshotClass API (the
// console says the same for a live cluster).
const NotServedSnapshotClasses = "the cluster does not serve VolumeSnapshotClasses (the external-snapshotter CRDs are not installed)"

const snapshotClassesResource = "volumesnapshotclasses.snapshot.storage.k8s.io"

// apiResource is a resource the cluster serves, at the version collected.
type apiResource struct {
	gvr        schema.GroupVersionResource
	namespaced bool
}

// facts are what earlier collectors found and later ones need.
type facts struct {
	served       map[schema.GroupResource]apiResource
	lvms         []apiResource
	classes      map[string]bool // StorageClasses of LVMS's provisioners
	pvs          map[string]bool // PersistentVolumes of LVMS's drivers
	pvcs         map[string]bool // namespace/name of claims on them
	found        map[string]bool // namespaces holding LVMS objects or agent pods
	agentPods    []corev1.Pod
	nsPods       []corev1.Pod // pods of the LVMS namespaces, for logs
	namespaces   []string
	namespaceSet map[string]bool
}

func newFacts() facts {
	return facts{served: map[schema.GroupResource]apiResource{}, classes: map[string]bool{}, pvs: map[string]bool{},
		pvcs: map[string]bool{}, found: map[string]bool{}}
}

func (f *facts) foundNamespaces() []string {
	out := make([]string, 0, len(f.found))
	for ns := range f.found {
		out = append(out, ns)
	}
	return out
}

// collectCluster records the server, the caller and which APIs are served.
func (r *run) collectCluster(ctx context.Context, t *tally) error {
	var problems []string
	if err := r.writeDiscovery(t); err != nil {
		problems = append(problems, err.Error())
	}
	if v, err := r.disc.ServerVersion(); err == nil {
		r.manifest.ServerVersion = v.GitVersion
	} else {
		problems = append(problems, fmt.Sprintf("server version: %v", err))
	}
	if off, ok := r.serverClockOffset(ctx); ok {
		r.manifest.ServerClockOffset = &off
	}
	if ssr, err := r.cs.AuthenticationV1().SelfSubjectReviews().Create(ctx, &authnv1.SelfSubjectReview{}, metav1.CreateOptions{}); err == nil {
		r.mu.Lock()
		r.manifest.User = ssr.Status.UserInfo.Username
		r.mu.Unlock()
	}
	lists, err := r.disc.ServerPreferredResources()
	if err != nil && !discovery.IsGroupDiscoveryFailedError(err) {
		return fmt.Errorf("discover the cluster's APIs: %w", err)
	}
	if err != nil {
		problems = append(problems, fmt.Sprintf("some APIs could not be discovered: %v", err))
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, l := range lists {
		gv, perr := schema.ParseGroupVersion(l.GroupVersion)
		if perr != nil {
			continue
		}
		for _, res := range l.APIResources {
			if strings.Contains(res.Name, "/") || !slices.Contains(res.Verbs, "list") {
				continue
			}
			ar := apiResource{gvr: gv.WithResource(res.Name), namespaced: res.Namespaced}
			gr := ar.gvr.GroupResource()
			if _, dup := r.facts.served[gr]; dup {
				continue
			}
			r.facts.served[gr] = ar
			if slices.Contains(LVMSGroups, gv.Group) {
				r.facts.lvms = append(r.facts.lvms, ar)
				if gv.Group == "lvm.topolvm.io" {
					r.manifest.Installed = true
				}
			}
		}
	}
	slices.SortFunc(r.facts.lvms, func(a, b apiResource) int {
		return cmp.Or(strings.Compare(a.gvr.Group, b.gvr.Group), strings.Compare(a.gvr.Resource, b.gvr.Resource))
	})
	if _, ok := r.facts.served[schema.GroupResource{Group: "snapshot.storage.k8s.io", Resource: "volumesnapshotclasses"}]; !ok {
		r.manifest.Hidden = append(r.manifest.Hidden, console.HiddenKind{Resource: snapshotClassesResource, Reason: NotServedSnapshotClasses})
	}
	if len(problems) > 0 {
		return fmt.Errorf("%s", strings.Join(problems, "; "))
	}
	return nil
}

// resourceSpec says how one resource is collected.
type resourceSpec struct {
	group, resource string
	// label names the collector when one resource has two collectors.
	label string
	// namespaces to list (nil: every namespace, or cluster-scoped).
	namespaces []string
	// keep filters objects (nil keeps all); note records facts about kept ones; slim trims them.
	keep func(u *unstructured.Unstructured) bool
	note func(u *unstructured.Unstructured)
	slim func(u *unstructured.Unstructured) *unstructured.Unstructured
}

// resourceCollector lists a resource and writes each kept object to its file. A resource the cluster does
// not serve is skipped silently when optional, else fails.
func (r *run) resourceCollector(spec resourceSpec) collector {
	name := "resources/" + spec.resource
	if spec.group != "" {
		name += "." + spec.group
	}
	if spec.label != "" {
		name += " (" + spec.label + ")"
	}
	return collector{name: name, run: func(ctx context.Context, t *tally) error {
		r.mu.Lock()
		ar, ok := r.facts.served[schema.GroupResource{Group: spec.group, Resource: spec.resource}]
		r.mu.Unlock()
		if !ok {
			return fmt.Errorf("the cluster does not serve %s", schema.GroupResource{Group: spec.group, Resource: spec.resource})
		}
		namespaces := []string{metav1.NamespaceAll}
		if ar.namespaced && spec.namespaces != nil {
			namespaces = spec.namespaces
		}
		var tableErr error
		for _, ns := range namespaces {
			items, err := r.list(ctx, ar, ns)
			if err != nil {
				return err
			}
			kept := map[string]bool{}
			for i := range items {
				u := &items[i]
				if spec.keep != nil && !spec.keep(u) {
					continue
				}
				kept[u.GetNamespace()+"/"+u.GetName()] = true
				if spec.note != nil {
					r.mu.Lock()
					spec.note(u)
					r.mu.Unlock()
				}
				if spec.slim != nil {
					u = spec.slim(u)
				}
				if err := r.writeObject(t, ar.gvr.Group, ar.gvr.Resource, u); err != nil {
					return err
				}
			}
			// The objects are what matters; without their Table a served bundle prints NAME and AGE.
			if err := r.recordTable(ctx, ar, ns, kept); err != nil && tableErr == nil {
				tableErr = err
			}
		}
		return tableErr
	}}
}

// list lists a resource in namespace ("" for all), 500 at a time.
func (r *run) list(ctx context.Context, ar apiResource, namespace string) ([]unstructured.Unstructured, error) {
	var out []unstructured.Unstructured
	opts := metav1.ListOptions{Limit: 500}
	for {
		var l *unstructured.UnstructuredList
		var err error
		if ar.namespaced {
			l, err = r.dyn.Resource(ar.gvr).Namespace(namespace).List(ctx, opts)
		} else {
			l, err = r.dyn.Resource(ar.gvr).List(ctx, opts)
		}
		if err != nil {
			where := ""
			if namespace != "" {
				where = " in namespace " + namespace
			}
			return out, fmt.Errorf("list %s%s: %w", ar.gvr.GroupResource(), where, err)
		}
		out = append(out, l.Items...)
		if l.GetContinue() == "" {
			return out, nil
		}
		opts.Continue = l.GetContinue()
	}
}

// writeObject cleans, redacts and writes one object.
func (r *run) writeObject(t *tally, group, resource string, u *unstructured.Unstructured) error {
	p, err := bundle.ObjectPath(group, resource, u.GetNamespace(), u.GetName())
	if err != nil {
		return fmt.Errorf("%s %s: %w", resource, u.GetName(), err)
	}
	u.SetManagedFields(nil)
	r.red.Object(p, u.Object)
	data, err := yaml.Marshal(u.Object)
	if err != nil {
		return fmt.Errorf("encode %s: %w", p, err)
	}
	return t.write(p, data)
}

func nestedString(u *unstructured.Unstructured, fields ...string) string {
	s, _, _ := unstructured.NestedString(u.Object, fields...)
	return s
}

func (r *run) phaseOne() []collector {
	var cs []collector
	for _, ar := range r.facts.lvms {
		cs = append(cs, r.resourceCollector(resourceSpec{group: ar.gvr.Group, resource: ar.gvr.Resource,
			note: func(u *unstructured.Unstructured) {
				if ns := u.GetNamespace(); ns != "" {
					r.facts.found[ns] = true
				}
			}}))
	}
	cs = append(cs,
		r.resourceCollector(resourceSpec{group: "storage.k8s.io", resource: "storageclasses", note: func(u *unstructured.Unstructured) {
			if slices.Contains(LVMSDrivers, nestedString(u, "provisioner")) {
				r.facts.classes[u.GetName()] = true
			}
		}}),
		r.resourceCollector(resourceSpec{group: "storage.k8s.io", resource: "csidrivers"}),
		r.resourceCollector(resourceSpec{group: "storage.k8s.io", resource: "csinodes"}),
		// CSIStorageCapacities are collected in phase two, once LVMS's StorageClasses are known.
		r.resourceCollector(resourceSpec{resource: "nodes", slim: slimNode}),
		r.resourceCollector(resourceSpec{resource: "persistentvolumes",
			keep: func(u *unstructured.Unstructured) bool {
				return slices.Contains(LVMSDrivers, nestedString(u, "spec", "csi", "driver"))
			},
			note: func(u *unstructured.Unstructured) { r.facts.pvs[u.GetName()] = true }}),
		collector{name: "node-agent-pods", run: r.findAgentPods},
	)
	if _, ok := r.facts.served[schema.GroupResource{Group: "snapshot.storage.k8s.io", Resource: "volumesnapshotclasses"}]; ok {
		cs = append(cs, r.resourceCollector(resourceSpec{group: "snapshot.storage.k8s.io", resource: "volumesnapshotclasses"}))
	}
	return cs
}

// findAgentPods lists the node agent pods of every namespace (their namespaces are LVMS namespaces).
func (r *run) findAgentPods(ctx context.Context, _ *tally) error {
	sel := names.ComponentLabel + "=" + names.ComponentNodeAgent
	var pods []corev1.Pod
	opts := metav1.ListOptions{LabelSelector: sel, Limit: 500}
	for {
		l, err := r.cs.CoreV1().Pods(metav1.NamespaceAll).List(ctx, opts)
		if err != nil {
			return fmt.Errorf("list node agent pods (%s): %w", sel, err)
		}
		pods = append(pods, l.Items...)
		if l.Continue == "" {
			break
		}
		opts.Continue = l.Continue
	}
	slices.SortFunc(pods, func(a, b corev1.Pod) int {
		return cmp.Or(strings.Compare(a.Spec.NodeName, b.Spec.NodeName), strings.Compare(a.Namespace, b.Namespace), strings.Compare(a.Name, b.Name))
	})
	r.mu.Lock()
	defer r.mu.Unlock()
	r.facts.agentPods = pods
	for _, p := range pods {
		r.facts.found[p.Namespace] = true
	}
	return nil
}

func (r *run) phaseTwo() []collector {
	r.mu.Lock()
	nss := slices.Clone(r.facts.namespaces)
	r.facts.namespaceSet = map[string]bool{}
	for _, ns := range nss {
		r.facts.namespaceSet[ns] = true
	}
	r.mu.Unlock()
	cs := []collector{
		r.resourceCollector(resourceSpec{resource: "persistentvolumeclaims",
			keep: func(u *unstructured.Unstructured) bool {
				return r.facts.classes[nestedString(u, "spec", "storageClassName")] || r.facts.pvs[nestedString(u, "spec", "volumeName")]
			},
			note: func(u *unstructured.Unstructured) { r.facts.pvcs[u.GetNamespace()+"/"+u.GetName()] = true }}),
		r.resourceCollector(resourceSpec{group: "storage.k8s.io", resource: "csistoragecapacities",
			keep: func(u *unstructured.Unstructured) bool { return r.facts.classes[nestedString(u, "storageClassName")] }}),
	}
	if len(nss) == 0 {
		return cs
	}
	return append(cs,
		r.resourceCollector(resourceSpec{resource: "pods", label: "LVMS namespaces", namespaces: nss, note: func(u *unstructured.Unstructured) {
			var p corev1.Pod
			if runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &p) == nil {
				r.facts.nsPods = append(r.facts.nsPods, p)
			}
		}}),
		r.resourceCollector(resourceSpec{resource: "configmaps", namespaces: nss}),
		r.resourceCollector(resourceSpec{group: "apps", resource: "daemonsets", namespaces: nss}),
		r.resourceCollector(resourceSpec{group: "apps", resource: "deployments", namespaces: nss}),
	)
}

func (r *run) phaseThree() []collector {
	claimNamespaces := r.facts.claimNamespaces()
	return []collector{
		r.resourceCollector(resourceSpec{resource: "pods", label: "using LVMS volumes",
			keep: func(u *unstructured.Unstructured) bool {
				return !r.facts.namespaceSet[u.GetNamespace()] && usesClaim(u, r.facts.pvcs)
			}, slim: slimPod}),
		{name: "events", run: r.collectEvents},
		// The namespaces of what was collected: kubectl asks for a namespace when an object in it is not
		// found, to say which of the two is missing.
		r.resourceCollector(resourceSpec{resource: "namespaces", keep: func(u *unstructured.Unstructured) bool {
			return r.facts.namespaceSet[u.GetName()] || claimNamespaces[u.GetName()]
		}}),
	}
}

// claimNamespaces are the namespaces of the collected claims.
func (f *facts) claimNamespaces() map[string]bool {
	out := map[string]bool{}
	for k := range f.pvcs {
		ns, _, _ := strings.Cut(k, "/")
		out[ns] = true
	}
	return out
}

// usesClaim reports whether a pod mounts one of claims (namespace/name).
func usesClaim(u *unstructured.Unstructured, claims map[string]bool) bool {
	vols, _, _ := unstructured.NestedSlice(u.Object, "spec", "volumes")
	for _, v := range vols {
		m, _ := v.(map[string]any)
		if c, ok := m["persistentVolumeClaim"].(map[string]any); ok {
			if name, _ := c["claimName"].(string); claims[u.GetNamespace()+"/"+name] {
				return true
			}
		}
	}
	return false
}

// slimNode drops a Node's image list (large, never needed).
func slimNode(u *unstructured.Unstructured) *unstructured.Unstructured {
	unstructured.RemoveNestedField(u.Object, "status", "images")
	return u
}

// slimPod keeps what links a workload pod to its claims: name, node, claim volumes, phase.
func slimPod(u *unstructured.Unstructured) *unstructured.Unstructured {
	out := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "Pod"}}
	out.SetName(u.GetName())
	out.SetNamespace(u.GetNamespace())
	out.SetUID(u.GetUID())
	if n := nestedString(u, "spec", "nodeName"); n != "" {
		_ = unstructured.SetNestedField(out.Object, n, "spec", "nodeName")
	}
	vols, _, _ := unstructured.NestedSlice(u.Object, "spec", "volumes")
	var keep []any
	for _, v := range vols {
		if m, _ := v.(map[string]any); m != nil && m["persistentVolumeClaim"] != nil {
			keep = append(keep, map[string]any{"name": m["name"], "persistentVolumeClaim": m["persistentVolumeClaim"]})
		}
	}
	if keep != nil {
		_ = unstructured.SetNestedSlice(out.Object, keep, "spec", "volumes")
	}
	if ph := nestedString(u, "status", "phase"); ph != "" {
		_ = unstructured.SetNestedField(out.Object, ph, "status", "phase")
	}
	return out
}

// collectEvents writes the events about LVMS objects, nodes, LVMS volumes and claims, and everything in the
// LVMS namespaces, newer than Since, one List per namespace.
func (r *run) collectEvents(ctx context.Context, t *tally) error {
	ar := apiResource{gvr: schema.GroupVersionResource{Version: "v1", Resource: "events"}, namespaced: true}
	items, err := r.list(ctx, ar, metav1.NamespaceAll)
	if err != nil {
		return err
	}
	byNS := map[string][]any{}
	kept := map[string]bool{}
	r.mu.Lock()
	for i := range items {
		u := &items[i]
		if r.relevantEvent(u) && !eventTime(u).Before(r.opts.Since) {
			kept[u.GetNamespace()+"/"+u.GetName()] = true
			u.SetManagedFields(nil)
			byNS[u.GetNamespace()] = append(byNS[u.GetNamespace()], u.Object)
		}
	}
	r.mu.Unlock()
	for _, ns := range sortedKeys(byNS) {
		p, err := bundle.EventsPath(ns)
		if err != nil {
			return err
		}
		list := map[string]any{"apiVersion": "v1", "kind": "List", "items": byNS[ns]}
		r.red.Object(p, list)
		data, err := yaml.Marshal(list)
		if err != nil {
			return fmt.Errorf("encode %s: %w", p, err)
		}
		if err := t.write(p, data); err != nil {
			return err
		}
	}
	return r.recordTable(ctx, ar, metav1.NamespaceAll, kept)
}

// relevantEvent: about an LVMS object, a Node, an LVMS volume or claim, or in an LVMS namespace.
func (r *run) relevantEvent(u *unstructured.Unstructured) bool {
	if r.facts.namespaceSet[u.GetNamespace()] {
		return true
	}
	kind, apiVersion := nestedString(u, "involvedObject", "kind"), nestedString(u, "involvedObject", "apiVersion")
	name, ns := nestedString(u, "involvedObject", "name"), nestedString(u, "involvedObject", "namespace")
	group, _, _ := strings.Cut(apiVersion, "/")
	switch {
	case slices.Contains(LVMSGroups, group):
		return true
	case kind == "Node":
		return true
	case kind == "PersistentVolume":
		return r.facts.pvs[name]
	case kind == "PersistentVolumeClaim":
		return r.facts.pvcs[ns+"/"+name]
	}
	return false
}

// eventTime is the latest time an event happened.
func eventTime(u *unstructured.Unstructured) time.Time {
	for _, f := range [][]string{{"lastTimestamp"}, {"series", "lastObservedTime"}, {"eventTime"}, {"firstTimestamp"}, {"metadata", "creationTimestamp"}} {
		if s := nestedString(u, f...); s != "" {
			if t, err := time.Parse(time.RFC3339Nano, s); err == nil {
				return t
			}
		}
	}
	return time.Time{}
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// serverClockOffset measures the API server's clock against ours from the Date header of a request (to the
// second: the header has no finer resolution).
func (r *run) serverClockOffset(ctx context.Context) (time.Duration, bool) {
	hc, err := rest.HTTPClientFor(r.opts.Config)
	if err != nil {
		return 0, false
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, strings.TrimSuffix(r.opts.Config.Host, "/")+"/version", nil)
	if err != nil {
		return 0, false
	}
	before := r.opts.Clock.Now()
	resp, err := hc.Do(req)
	if err != nil {
		return 0, false
	}
	after := r.opts.Clock.Now()
	_ = resp.Body.Close()
	date, err := http.ParseTime(resp.Header.Get("Date"))
	if err != nil {
		return 0, false
	}
	// The header truncates to the second: its middle is the best estimate.
	return date.Add(500 * time.Millisecond).Sub(before.Add(after.Sub(before) / 2)).Round(time.Second), true
}
