package handover

import (
	"context"
	"fmt"
	"slices"

	authv1 "k8s.io/api/authorization/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime/schema"

	lvmv1 "github.com/lvms-dev/lvms/api/lvm/v1alpha1"
	lvmv2 "github.com/lvms-dev/lvms/api/lvm/v2alpha1"
)

// Action is what a caller asks of the migration; each needs its own permissions.
type Action string

// Actions, in the order a migration takes them.
const (
	ActionPlan      Action = "plan"
	ActionPreflight Action = "preflight"
	ActionApply     Action = "apply"
	ActionVerify    Action = "verify"
	ActionRollback  Action = "rollback"
)

// Access is one permission: a verb on a resource, in the migration's namespace unless the resource is
// cluster-scoped (or, for claims, listed in every namespace).
type Access struct{ Group, Resource, Verb string }

// String is "verb resource.group", as RBAC rules and kubectl auth can-i name it.
func (a Access) String() string {
	if a.Group == "" {
		return a.Verb + " " + a.Resource
	}
	return a.Verb + " " + a.Resource + "." + a.Group
}

// Namespaced reports whether the permission is asked in the migration's namespace.
func (a Access) Namespaced() bool {
	return !slices.Contains([]string{"logicalvolumes", "persistentvolumes", "persistentvolumeclaims", "nodes", "storageclasses", "volumesnapshotclasses"}, a.Resource)
}

// snapshotGroup serves VolumeSnapshotClasses; a cluster without it needs no permission on them.
const snapshotGroup = "snapshot.storage.k8s.io"

var (
	lvm1, lvm2 = lvmv1.GroupVersion.Group, lvmv2.GroupVersion.Group

	// planNeeds are the reads of PlanFromCluster.
	planNeeds = []Access{{lvm1, "lvmclusters", "get"}, {lvm1, "lvmclusters", "list"}, {"storage.k8s.io", "storageclasses", "list"},
		{snapshotGroup, "volumesnapshotclasses", "list"}}
	// readNeeds are the reads of preflight, verify and the waits of apply and rollback (the record's
	// snapshot gets each class and node).
	readNeeds = append(slices.Clone(planNeeds),
		Access{"storage.k8s.io", "storageclasses", "get"}, Access{snapshotGroup, "volumesnapshotclasses", "get"},
		Access{lvm2, "lvmnodesets", "get"}, Access{lvm2, "lvmnodesets", "list"}, Access{lvm2, "lvmnodes", "get"},
		Access{lvm1, "lvmvolumegroupnodestatuses", "list"}, Access{"topolvm.io", "logicalvolumes", "list"},
		Access{"", "persistentvolumes", "list"}, Access{"", "persistentvolumeclaims", "list"}, Access{"", "nodes", "get"})
	actionNeeds = map[Action][]Access{
		ActionPlan: planNeeds,
		// Preflight's dry run needs the permissions of the writes it tries.
		ActionPreflight: append(slices.Clone(readNeeds), Access{lvm1, "lvmclusters", "patch"}, Access{lvm2, "lvmnodesets", "create"}, Access{lvm2, "lvmnodesets", "patch"}),
		ActionApply: append(slices.Clone(readNeeds), Access{lvm1, "lvmclusters", "patch"}, Access{lvm1, "lvmclusters", "delete"},
			Access{lvm2, "lvmnodesets", "create"}, Access{lvm2, "lvmnodesets", "patch"}),
		ActionVerify:   readNeeds,
		ActionRollback: append(slices.Clone(readNeeds), Access{lvm1, "lvmclusters", "patch"}, Access{lvm2, "lvmnodesets", "patch"}, Access{lvm2, "lvmnodesets", "delete"}),
	}
)

// Needs returns the permissions the actions need together, without repeats, in a stable order.
func Needs(actions ...Action) []Access {
	var out []Access
	for _, a := range actions {
		for _, n := range actionNeeds[a] {
			if !slices.Contains(out, n) {
				out = append(out, n)
			}
		}
	}
	return out
}

// Missing asks the API server, for the caller itself (SelfSubjectAccessReview), about each permission and
// returns those it lacks, each as "verb resource.group" with " in namespace ns" when namespaced.
func (m *Migrator) Missing(ctx context.Context, ns string, needs []Access) ([]string, error) {
	denied, err := m.Denied(ctx, ns, needs)
	if err != nil {
		return nil, err
	}
	var missing []string
	for _, a := range needs {
		if denied[a] {
			missing = append(missing, a.Where(ns))
		}
	}
	return missing, nil
}

// Where is the permission as Missing names it: with " in namespace ns" when namespaced.
func (a Access) Where(ns string) string {
	if a.Namespaced() {
		return a.String() + " in namespace " + ns
	}
	return a.String()
}

// Denied asks the API server about each permission once, for the caller itself, and returns those it
// lacks.
func (m *Migrator) Denied(ctx context.Context, ns string, needs []Access) (map[Access]bool, error) {
	denied := map[Access]bool{}
	asked := map[Access]bool{}
	for _, a := range needs {
		if asked[a] || !m.served(a) {
			continue
		}
		asked[a] = true
		ra := &authv1.ResourceAttributes{Group: a.Group, Resource: a.Resource, Verb: a.Verb}
		if a.Namespaced() {
			ra.Namespace = ns
		}
		r := &authv1.SelfSubjectAccessReview{Spec: authv1.SelfSubjectAccessReviewSpec{ResourceAttributes: ra}}
		if err := m.Client.Create(ctx, r); err != nil {
			return nil, fmt.Errorf("ask the API server about the caller's permissions: %w", err)
		}
		if !r.Status.Allowed {
			denied[a] = true
		}
	}
	return denied, nil
}

// served reports whether the cluster serves the permission's resource; one it does not serve needs no
// permission (the steps skip it). Only the snapshot API is optional.
func (m *Migrator) served(a Access) bool {
	if a.Group != snapshotGroup {
		return true
	}
	_, err := m.Client.RESTMapper().KindFor(schema.GroupVersionResource{Group: a.Group, Resource: a.Resource})
	return !apimeta.IsNoMatchError(err)
}
