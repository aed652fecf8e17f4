package agent

import (
	"context"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	lvmv2 "github.com/lvms-dev/lvms/api/lvm/v2alpha1"
	"github.com/lvms-dev/lvms/e2e/testenv"
	"github.com/lvms-dev/lvms/nodeagent/loopdev"
)

// TestAgent_DeviceEventStartsAPass: with the kernel's device events, a disk attached to a converged node is
// put into the volume group that selects it at once, though the agent's periodic reconcile is an hour
// away; the idle reconcile period is then the long one.
func TestAgent_DeviceEventStartsAPass(t *testing.T) {
	testenv.Require(t)
	loopdev.RequireRoot(t)
	ctrl.SetLogger(logr.Discard())
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	prefix := loopdev.Prefix(t)
	runner := loopdev.Runner(t, prefix, "events", nil)
	ns := env.Namespace(t)
	nodeName := "events-" + ns
	if err := env.Client.Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: nodeName}}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = env.Client.Delete(context.Background(), &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: nodeName}})
	})
	mgr, err := ctrl.NewManager(env.Config, ctrl.Options{Scheme: env.Scheme, Metrics: metricsserver.Options{BindAddress: "0"}})
	if err != nil {
		t.Fatal(err)
	}
	a, err := New(mgr.GetClient(), Options{NodeName: nodeName, Namespace: ns, Runner: runner, Reader: mgr.GetAPIReader(),
		LVMDConfigPath: filepath.Join(t.TempDir(), "lvmd.yaml"), DeviceEvents: true, Resync: time.Hour, EventResync: 2 * time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	if err := a.SetupWithManager(mgr); err != nil {
		t.Fatal(err)
	}
	done := make(chan error)
	go func() { done <- mgr.Start(ctx) }()
	stopAgent := sync.OnceFunc(func() { cancel(); <-done })
	t.Cleanup(stopAgent)

	// The volume group selects a size no other test uses, so that only the disk attached below is taken.
	const size = 199<<20 + 8192
	vg := prefix + "-ev"
	if err := env.Client.Create(ctx, &lvmv2.LVMNode{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: nodeName}, Spec: lvmv2.LVMNodeSpec{
		VolumeGroups: []lvmv2.VolumeGroup{{Name: vg, DeviceSelector: lvmv2.DeviceSelector{DeviceSelectorTerms: []lvmv2.DeviceSelectorTerm{
			term(expr(lvmv2.KeySize, lvmv2.OpIn, strconv.Itoa(size)))}}}},
	}}); err != nil {
		t.Fatal(err)
	}
	vgStatus := func() (lvmv2.VolumeGroupStatus, bool) {
		var ln lvmv2.LVMNode
		if err := env.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: nodeName}, &ln); err != nil {
			return lvmv2.VolumeGroupStatus{}, false
		}
		for _, v := range ln.Status.VolumeGroups {
			if v.Name == vg {
				return v, ln.Status.ObservedGeneration == ln.Generation
			}
		}
		return lvmv2.VolumeGroupStatus{}, false
	}
	eventually(t, "the first pass reports the volume group without devices", func() bool {
		_, ok := vgStatus()
		return ok && a.deviceEvents.Load()
	})
	if got := a.resync(); got != 2*time.Hour {
		t.Errorf("idle reconcile period with device events = %v, want EventResync (2h)", got)
	}
	disk := loopdev.Attach(t, loopdev.Dir(t), size, false)
	// Cleanups run last first: the agent stops, then its volume group goes, then the disk is detached.
	t.Cleanup(func() { loopdev.CleanupVGs(t, runner, prefix) })
	t.Cleanup(stopAgent)
	eventually(t, "the attached disk "+disk+" in the volume group, without waiting for a resync", func() bool {
		v, _ := vgStatus()
		return len(v.Devices.Included) == 1 && v.Devices.Included[0].KName == disk
	})
}
