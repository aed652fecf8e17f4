package agent

import (
	"context"
	"os"
	"slices"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	lvmv1 "github.com/lvms-dev/lvms/api/lvm/v1alpha1"
	lvmv2 "github.com/lvms-dev/lvms/api/lvm/v2alpha1"
	"github.com/lvms-dev/lvms/e2e/testenv"
	"github.com/lvms-dev/lvms/nodeagent/status"
)

// newCluster creates an LVMCluster. The managed one is the oldest, then the first by name: tests create it
// first and give duplicates names that sort after it, so the outcome does not depend on the clock.
func newCluster(t *testing.T, ns, name string, policy lvmv1.ConfigurationPolicy) *lvmv1.LVMCluster {
	t.Helper()
	testenv.Require(t)
	c := &lvmv1.LVMCluster{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Spec: lvmv1.LVMClusterSpec{ConfigurationPolicy: policy}}
	if policy == "" {
		c.Spec.Storage.DeviceClasses = []lvmv1.DeviceClass{{Name: "vg1"}}
	}
	if err := env.Client.Create(context.Background(), c); err != nil {
		t.Fatal(err)
	}
	return c
}

// TestAgent_ActsOnlyOnTheManagedClustersVolumeGroups: a hand-made LVMVolumeGroup and one of a duplicate
// LVMCluster select a free disk of the node; the agent creates no volume group for them, puts no finalizer
// on them and does not report them.
func TestAgent_ActsOnlyOnTheManagedClustersVolumeGroups(t *testing.T) {
	testenv.Require(t)
	ctx := context.Background()
	host := newServerHost(t)
	a, ns := newTestAgent(t, host, map[string]string{"storage": "lvms"})
	newCluster(t, ns, "lvms", "")
	duplicate := newCluster(t, ns, "zz-duplicate", "")
	handMade := v1VolumeGroup(ns, nil)
	handMade.Name = "handmade"
	foreign := v1VolumeGroup(ns, duplicate)
	foreign.Name = "foreign"
	handMade.Spec.DeviceSelector = &lvmv1.DeviceSelector{Paths: []lvmv1.DevicePath{"/dev/nvme3n1"}}
	foreign.Spec.DeviceSelector = &lvmv1.DeviceSelector{Paths: []lvmv1.DevicePath{"/dev/nvme0n1"}}
	for _, vg := range []*lvmv1.LVMVolumeGroup{handMade, foreign} {
		vg.Spec.ThinPoolConfig.Name = vg.Name + "-pool"
		if err := env.Client.Create(ctx, vg); err != nil {
			t.Fatal(err)
		}
	}
	reconcileOnce(t, a)

	if changes := host.changes(); len(changes) != 0 {
		t.Errorf("LVMVolumeGroups the managed LVMCluster does not own changed the disks: %v", changes)
	}
	for _, vg := range []*lvmv1.LVMVolumeGroup{handMade, foreign} {
		if err := env.Client.Get(ctx, client.ObjectKeyFromObject(vg), vg); err != nil {
			t.Fatal(err)
		}
		if slices.Contains(vg.Finalizers, VolumeGroupFinalizer(a.opts.NodeName)) {
			t.Errorf("the agent put its finalizer on LVMVolumeGroup %s, which the managed LVMCluster does not own", vg.Name)
		}
	}
	var st lvmv1.LVMVolumeGroupNodeStatus
	if err := env.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: a.opts.NodeName}, &st); err != nil {
		t.Fatal(err)
	}
	if len(st.Spec.LVMVGStatus) != 0 {
		t.Errorf("node status reports volume groups of LVMVolumeGroups the managed LVMCluster does not own: %s", mustJSON(st.Spec))
	}
}

// TestAgent_DuplicateClusterDoesNotSwitchToExternal: only the managed LVMCluster's configurationPolicy
// counts; a second LVMCluster with ExternalConfiguration leaves the agent writing lvmd.yaml for the managed
// cluster's volume group.
func TestAgent_DuplicateClusterDoesNotSwitchToExternal(t *testing.T) {
	testenv.Require(t)
	ctx := context.Background()
	host := newServerHost(t)
	a, ns := newTestAgent(t, host, map[string]string{"storage": "lvms"})
	managed := newCluster(t, ns, "lvms", "")
	newCluster(t, ns, "zz-duplicate", lvmv1.ConfigurationPolicyExternal)
	if err := env.Client.Create(ctx, v1VolumeGroup(ns, managed)); err != nil {
		t.Fatal(err)
	}
	reconcileOnce(t, a)

	data, err := os.ReadFile(a.opts.LVMDConfigPath)
	if err != nil || !strings.Contains(string(data), "volume-group: vg1") {
		t.Errorf("the agent did not write lvmd.yaml for the managed cluster's vg1 (%v): %q", err, data)
	}
	var st lvmv1.LVMVolumeGroupNodeStatus
	if err := env.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: a.opts.NodeName}, &st); err != nil {
		t.Fatal(err)
	}
	if c, _ := status.FindCondition(st.Status.Conditions, lvmv2.ConditionVolumeGroupsHealthy); c.Reason == "ExternalConfiguration" {
		t.Errorf("a duplicate LVMCluster switched the agent to ExternalConfiguration: %+v", c)
	}
	if changes := host.changes(); len(changes) != 0 {
		t.Errorf("commands that change disks ran: %v", changes)
	}
}
