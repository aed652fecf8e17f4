package live

import (
	"context"
	"fmt"
	"slices"

	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/lvms-dev/lvms/console"
)

// Group/versions the console reads; each kind belongs to one.
const (
	groupLVMv2    = "lvm.topolvm.io/v2alpha1"
	groupLVMv1    = "lvm.topolvm.io/v1alpha1"
	groupTopoLVM  = "topolvm.io/v1"
	groupCore     = "v1"
	groupStorage  = "storage.k8s.io/v1"
	groupSnapshot = "snapshot.storage.k8s.io/v1"
)

var snapshotClassGVK = schema.GroupVersionKind{Group: "snapshot.storage.k8s.io", Version: "v1", Kind: "VolumeSnapshotClass"}

func newSnapshotClass() client.Object {
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(snapshotClassGVK)
	return u
}

// servedSet is the group/versions the API server serves.
type servedSet map[string]bool

// lvms reports whether either LVMS API is served (the CRDs are installed).
func (s servedSet) lvms() bool { return s[groupLVMv2] || s[groupLVMv1] }

// discover asks the API server which of the console's group/versions it serves.
func discover(cfg *rest.Config) (servedSet, error) {
	dc, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("discovery client for %s: %w", cfg.Host, err)
	}
	groups, err := dc.ServerGroups()
	if err != nil {
		if apierrors.IsUnauthorized(err) {
			return nil, &console.AccessError{Unauthorized: true, Err: err}
		}
		return nil, fmt.Errorf("discover the APIs of %s: %w", cfg.Host, err)
	}
	served := servedSet{groupCore: true}
	for _, g := range groups.Groups {
		for _, v := range g.Versions {
			served[v.GroupVersion] = true
		}
	}
	return served, nil
}

// checkAccess lists one object of every kind the server serves, as the caller: the kinds the caller may
// read are returned; the others are hidden, or, for the LVMNodes (the LVMVolumeGroupNodeStatuses on a
// cluster with only the v1alpha1 API), fail with an *console.AccessError.
func checkAccess(ctx context.Context, c client.Client, served servedSet, user string) ([]kind, []console.HiddenKind, error) {
	var kinds []kind
	var hidden []console.HiddenKind
	for _, k := range allKinds {
		if !served[k.group] {
			if k.group == groupSnapshot {
				hidden = append(hidden, console.HiddenKind{Resource: k.resource,
					Reason: "the cluster does not serve VolumeSnapshotClasses (the external-snapshotter CRDs are not installed)"})
			}
			continue
		}
		err := probe(ctx, c, k)
		switch {
		case err == nil:
			kinds = append(kinds, k)
		case k.optional && notServed(err):
			// An older install: the group is served without this kind. There are none to show.
		case apierrors.IsUnauthorized(err):
			return nil, nil, &console.AccessError{User: user, Resource: k.resource, Unauthorized: true, Err: err}
		case apierrors.IsForbidden(err) && k.required && requiredHere(k, served):
			return nil, nil, &console.AccessError{User: user, Resource: k.resource, Err: err}
		case apierrors.IsForbidden(err):
			hidden = append(hidden, console.HiddenKind{Resource: k.resource, Reason: "you may not list " + k.resource + " in every namespace"})
		default:
			return nil, nil, fmt.Errorf("list %s: %w", k.resource, err)
		}
	}
	if len(kinds) == 0 {
		return nil, nil, errNoKinds
	}
	return kinds, hidden, nil
}

// notServed reports whether err says the server does not serve the kind at all (no CRD for it).
func notServed(err error) bool {
	return meta.IsNoMatchError(err) || apierrors.IsNotFound(err)
}

// requiredHere: LVMNodes are required when the v2alpha1 API is served, node statuses only on a cluster
// that serves v1alpha1 alone.
func requiredHere(k kind, served servedSet) bool {
	if k.group == groupLVMv1 {
		return !served[groupLVMv2]
	}
	return true
}

// probe lists at most one object of a kind, in every namespace.
func probe(ctx context.Context, c client.Client, k kind) error {
	obj := k.newObject()
	gvk, err := c.GroupVersionKindFor(obj)
	if u, ok := obj.(*unstructured.Unstructured); ok {
		gvk, err = u.GroupVersionKind(), nil
	}
	if err != nil {
		return fmt.Errorf("kind of %s: %w", k.resource, err)
	}
	l := &unstructured.UnstructuredList{}
	l.SetGroupVersionKind(gvk.GroupVersion().WithKind(gvk.Kind + "List"))
	return c.List(ctx, l, client.Limit(1))
}

// Resources lists every resource the console reads, for RBAC documentation and tests.
func Resources() []string {
	out := make([]string, 0, len(allKinds))
	for _, k := range allKinds {
		out = append(out, k.resource)
	}
	slices.Sort(out)
	return out
}

// ViewerRules are the RBAC rules that let a user see everything the console shows (bind them with a
// ClusterRole such as lvms-console-viewer): read-only get/list/watch on every resource it reads.
func ViewerRules() []rbacv1.PolicyRule {
	byGroup := map[string][]string{}
	var groups []string
	for _, k := range allKinds {
		g := schema.ParseGroupResource(k.resource).Group
		if _, ok := byGroup[g]; !ok {
			groups = append(groups, g)
		}
		byGroup[g] = append(byGroup[g], schema.ParseGroupResource(k.resource).Resource)
	}
	slices.Sort(groups)
	rules := make([]rbacv1.PolicyRule, 0, len(groups)+1)
	for _, g := range groups {
		rs := byGroup[g]
		slices.Sort(rs)
		rules = append(rules, rbacv1.PolicyRule{APIGroups: []string{g}, Resources: rs, Verbs: []string{"get", "list", "watch"}})
	}
	return append(rules, rbacv1.PolicyRule{APIGroups: []string{"authentication.k8s.io"}, Resources: []string{"selfsubjectreviews"}, Verbs: []string{"create"}})
}
