package operator

import (
	"context"
	"fmt"
	"time"

	groupsnapshotv1 "github.com/kubernetes-csi/external-snapshotter/client/v8/apis/volumegroupsnapshot/v1"
	snapshotv1 "github.com/kubernetes-csi/external-snapshotter/client/v8/apis/volumesnapshot/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	"github.com/lvms-dev/lvms/api"
	lvmv1 "github.com/lvms-dev/lvms/api/lvm/v1alpha1"
	lvmv2 "github.com/lvms-dev/lvms/api/lvm/v2alpha1"
	"github.com/lvms-dev/lvms/api/topolvm/driver"
	"github.com/lvms-dev/lvms/operator/lvmcluster"
	"github.com/lvms-dev/lvms/operator/noderemoval"
	"github.com/lvms-dev/lvms/operator/nodeset"
	"github.com/lvms-dev/lvms/operator/provider"
	"github.com/lvms-dev/lvms/operator/usage"
)

// Options configure the operator.
type Options struct {
	// Namespace the operator manages (LVMNodeSets, LVMNodes, LVMClusters, the node agent).
	Namespace string
	// Agent configures the node agent DaemonSet.
	Agent provider.AgentOptions
	// AgentReportTimeout: how long a node may wait for its agent's first report before it is Unknown.
	AgentReportTimeout time.Duration
	// NodeSetAppliesPerPass bounds the LVMNodes one reconcile of a set applies (0: the default, see
	// nodeset.DefaultAppliesPerPass).
	NodeSetAppliesPerPass int
	// Names select TopoLVM's group for everything the operator generates: the CSIDriver, the
	// StorageClasses' provisioner and device-class parameter, the VolumeSnapshotClasses' driver, the
	// node agent's LogicalVolume RBAC and its --legacy flag. The zero value is topolvm.io.
	Names driver.Names
	// Admission, when set, is the guard of the admission policies (operator/admission): the LVMNodeSets'
	// and LVMClusters' conditions say when a policy is not in place.
	Admission nodeset.Admission
}

// NewScheme returns the scheme the operator uses: Kubernetes, LVMS's APIs, the VolumeSnapshot and VolumeGroupSnapshot types.
func NewScheme() *runtime.Scheme {
	s := api.NewScheme()
	utilruntime.Must(snapshotv1.AddToScheme(s))
	utilruntime.Must(groupsnapshotv1.AddToScheme(s))
	return s
}

// CacheOptions scopes the cache: LVMS's objects and the node agent's workload objects only in namespace;
// Nodes, classes, PVCs and PVs cluster-wide. Managed fields are dropped from everything except LVMNodes,
// where the LVMNodeSet controller reads which set still owns spec fields; Nodes also lose their image lists.
func CacheOptions(namespace string) cache.Options {
	ns := map[string]cache.Config{namespace: {}}
	return cache.Options{
		DefaultTransform: cache.TransformStripManagedFields(),
		ByObject: map[client.Object]cache.ByObject{
			&lvmv2.LVMNodeSet{}:               {Namespaces: ns},
			&lvmv2.LVMNode{}:                  {Namespaces: ns, Transform: func(o any) (any, error) { return o, nil }},
			&lvmv1.LVMCluster{}:               {Namespaces: ns},
			&lvmv1.LVMVolumeGroup{}:           {Namespaces: ns},
			&lvmv1.LVMVolumeGroupNodeStatus{}: {Namespaces: ns},
			&appsv1.DaemonSet{}:               {Namespaces: ns},
			&corev1.ServiceAccount{}:          {Namespaces: ns},
			&rbacv1.Role{}:                    {Namespaces: ns},
			&rbacv1.RoleBinding{}:             {Namespaces: ns},
			&corev1.Node{}:                    {Transform: stripNode},
		},
	}
}

// stripNode keeps what selection needs (metadata, taints, conditions) and drops the rest of a Node.
func stripNode(o any) (any, error) {
	n, ok := o.(*corev1.Node)
	if !ok {
		return o, nil
	}
	n.ManagedFields = nil
	n.Status.Images = nil
	n.Status.VolumesInUse = nil
	n.Status.VolumesAttached = nil
	return n, nil
}

// ManagerOptions are manager.Options with the operator's scheme and cache; callers add metrics, health
// probes and leader election.
func ManagerOptions(opts Options) manager.Options {
	// Secrets are read one by one (the transfer CA's), never cached: the operator may not list them.
	return manager.Options{Scheme: NewScheme(), Cache: CacheOptions(opts.Namespace),
		Client: client.Options{Cache: &client.CacheOptions{DisableFor: []client.Object{&corev1.Secret{}}}}}
}

// Setup registers the indexes and controllers of the operator with mgr.
func Setup(ctx context.Context, mgr manager.Manager, opts Options) error {
	if opts.Namespace == "" {
		return fmt.Errorf("operator: no namespace given")
	}
	if err := usage.SetupIndexes(ctx, mgr.GetFieldIndexer()); err != nil {
		return err
	}
	if err := (&nodeset.Reconciler{
		Client:             mgr.GetClient(),
		Recorder:           mgr.GetEventRecorder("lvms-operator"),
		Namespace:          opts.Namespace,
		Names:              opts.Names,
		AgentReportTimeout: opts.AgentReportTimeout,
		AppliesPerPass:     opts.NodeSetAppliesPerPass,
		Admission:          opts.Admission,
	}).SetupWithManager(mgr); err != nil {
		return fmt.Errorf("set up the LVMNodeSet controller: %w", err)
	}
	if err := (&lvmcluster.Reconciler{
		Client:             mgr.GetClient(),
		Recorder:           mgr.GetEventRecorder("lvms-operator"),
		Namespace:          opts.Namespace,
		Names:              opts.Names,
		AgentReportTimeout: opts.AgentReportTimeout,
		Admission:          opts.Admission,
	}).SetupWithManager(mgr); err != nil {
		return fmt.Errorf("set up the LVMCluster controller: %w", err)
	}
	if err := (&provider.Reconciler{
		Client:    mgr.GetClient(),
		Namespace: opts.Namespace,
		Agent:     opts.Agent,
		Names:     opts.Names,
	}).SetupWithManager(mgr); err != nil {
		return fmt.Errorf("set up the provider controller: %w", err)
	}
	if err := (&noderemoval.Reconciler{
		Client:    mgr.GetClient(),
		Namespace: opts.Namespace,
	}).SetupWithManager(mgr); err != nil {
		return fmt.Errorf("set up the node removal controller: %w", err)
	}
	return nil
}
