package provisioner_test

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clocktesting "k8s.io/utils/clock/testing"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/config"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	lvmv2 "github.com/lvms-dev/lvms/api/lvm/v2alpha1"
	"github.com/lvms-dev/lvms/api/topolvm/driver"
	topolvmv1 "github.com/lvms-dev/lvms/api/topolvm/v1"
	"github.com/lvms-dev/lvms/e2e/testenv"
	sharedvolumes "github.com/lvms-dev/lvms/nodeagent/shared/volumes"
	"github.com/lvms-dev/lvms/operator/csicontroller"
	"github.com/lvms-dev/lvms/operator/provisioner"
)

// sharedWorld is a shared volume group "san" of an LVMNodeSet whose LVMNodes report it: the test plays the
// node agents (their LVMNode status, and the worker's LV work on the LogicalVolumes) and the kubelet.
type sharedWorld struct {
	*suite
	set   *lvmv2.LVMNodeSet
	mu    sync.Mutex
	nodes map[string]*lvmv2.VolumeGroupStatus // each node's report of the volume group
	// workedBy is every node that did a volume's work, by LogicalVolume.
	workedBy map[string][]string
	// clock decides whether a node's host-ID Lease is stale.
	clock *clocktesting.FakePassiveClock
}

const sharedClass = "vm-disks"

func newSharedWorld(t *testing.T) *sharedWorld {
	testenv.Require(t)
	names := driver.New(false)
	s := &suite{t: t, names: names, ns: env.Namespace(t), prefix: "shr", nodeA: "shr-node-a", nodeB: "shr-node-b"}
	scheme, err := names.Scheme()
	if err != nil {
		t.Fatal(err)
	}
	if s.c, err = client.New(env.Config, client.Options{Scheme: scheme}); err != nil {
		t.Fatal(err)
	}
	w := &sharedWorld{suite: s, nodes: map[string]*lvmv2.VolumeGroupStatus{}, workedBy: map[string][]string{}}
	ctx := context.Background()
	w.set = &lvmv2.LVMNodeSet{ObjectMeta: metav1.ObjectMeta{Name: "san", Namespace: s.ns},
		Spec: lvmv2.LVMNodeSetSpec{Template: lvmv2.LVMNodeSpec{
			VolumeGroups: []lvmv2.VolumeGroup{{Name: "san", AccessPolicy: lvmv2.AccessPolicyShared,
				DeviceSelector: lvmv2.DeviceSelector{DeviceSelectorTerms: []lvmv2.DeviceSelectorTerm{{MatchExpressions: []lvmv2.DeviceSelectorRequirement{
					{Key: lvmv2.KeyPath, Operator: lvmv2.OpIn, Values: []string{"/dev/disk/by-id/wwn-0x5000"}}}}}}}},
			DeviceClasses: []lvmv2.DeviceClass{{Name: sharedClass, Strategy: lvmv2.StrategyThick, VolumeGroup: "san"}},
		}}}
	if err := s.c.Create(ctx, w.set); err != nil {
		t.Fatal(err)
	}
	// Node c is selected but has not joined the lockspace: it never gets work.
	for _, n := range []string{s.nodeA, s.nodeB, "shr-node-c"} {
		node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: n, Labels: map[string]string{corev1.LabelHostname: n + "-host"}}}
		if err := s.c.Create(ctx, node); client.IgnoreAlreadyExists(err) != nil {
			t.Fatal(err)
		}
		if err := s.c.Create(ctx, &lvmv2.LVMNode{ObjectMeta: metav1.ObjectMeta{Name: n, Namespace: s.ns}, Spec: w.set.Spec.Template}); err != nil {
			t.Fatal(err)
		}
		w.report(n, func(vg *lvmv2.VolumeGroupStatus) { vg.Lockspace = lvmv2.LockspaceJoined })
	}
	w.report("shr-node-c", func(vg *lvmv2.VolumeGroupStatus) { vg.Lockspace = lvmv2.LockspaceNotJoined })

	skip := true
	mgr, err := ctrl.NewManager(env.Config, ctrl.Options{Scheme: scheme, Metrics: metricsserver.Options{BindAddress: "0"},
		Controller: config.Controller{SkipNameValidation: &skip}})
	if err != nil {
		t.Fatal(err)
	}
	w.clock = clocktesting.NewFakePassiveClock(time.Date(2031, 5, 6, 7, 8, 9, 0, time.UTC))
	shared := csicontroller.NewShared(mgr.GetClient(), mgr.GetAPIReader(), csicontroller.Options{Names: names, Clock: w.clock,
		Backoff: csicontroller.Backoff{Initial: 20 * time.Millisecond, Factor: 2, Cap: 200 * time.Millisecond}})
	p := provisioner.New(provisioner.Options{Names: names, CSI: shared, Shared: true, SharedCapacity: shared.Capacity,
		CapacityNamespace: s.ns, CallTimeout: callTimeout, InUseRetry: 200 * time.Millisecond})
	if err := p.SetupWithManager(mgr); err != nil {
		t.Fatal(err)
	}
	mctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := mgr.Start(mctx); err != nil {
			t.Errorf("manager: %v", err)
		}
	}()
	go w.playWorkers(mctx)
	t.Cleanup(func() { cancel(); <-done })
	return w
}

// report writes node n's status of the volume group after change.
func (w *sharedWorld) report(n string, change func(*lvmv2.VolumeGroupStatus)) {
	w.t.Helper()
	w.mu.Lock()
	vg := w.nodes[n]
	if vg == nil {
		vg = &lvmv2.VolumeGroupStatus{Name: "san", State: lvmv2.StateHealthy, Size: resource.NewQuantity(10<<30, resource.BinarySI),
			Free: resource.NewQuantity(10<<30, resource.BinarySI)}
		w.nodes[n] = vg
	}
	change(vg)
	cp := vg.DeepCopy()
	w.mu.Unlock()
	node := &lvmv2.LVMNode{}
	if err := w.c.Get(context.Background(), client.ObjectKey{Namespace: w.ns, Name: n}, node); err != nil {
		w.t.Fatal(err)
	}
	node.Status.VolumeGroups = []lvmv2.VolumeGroupStatus{*cp}
	if err := w.c.Status().Update(context.Background(), node); err != nil {
		w.t.Fatal(err)
	}
}

func (w *sharedWorld) joined(n string) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.nodes[n] != nil && w.nodes[n].Lockspace == lvmv2.LockspaceJoined
}

// playWorkers does what the worker's agent does (nodeagent/shared/volumes) for every shared LogicalVolume
// whose worker is in the lockspace: create, grow, remove.
func (w *sharedWorld) playWorkers(ctx context.Context) {
	for ctx.Err() == nil {
		time.Sleep(20 * time.Millisecond)
		list := &topolvmv1.LogicalVolumeList{}
		if err := w.c.List(ctx, list); err != nil {
			continue
		}
		for i := range list.Items {
			lv := &list.Items[i]
			worker := lv.Annotations[driver.SharedWorkerAnnotation]
			if !sharedvolumes.IsShared(lv) || !w.joined(worker) {
				continue
			}
			w.mu.Lock()
			if ws := w.workedBy[lv.Name]; len(ws) == 0 || ws[len(ws)-1] != worker {
				w.workedBy[lv.Name] = append(ws, worker)
			}
			w.mu.Unlock()
			switch {
			case !lv.DeletionTimestamp.IsZero():
				controllerutil.RemoveFinalizer(lv, w.names.LogicalVolumeFinalizer())
				_ = w.c.Update(ctx, lv)
			case lv.Status.VolumeID == "" || lv.Status.CurrentSize.Cmp(lv.Spec.Size) < 0:
				lv.Status.VolumeID, lv.Status.CurrentSize = string(lv.UID), &lv.Spec.Size
				_ = w.c.Status().Update(ctx, lv)
			}
		}
	}
}

func (w *sharedWorld) storageClass() string {
	return w.suite.storageClass(sharedClass, true, func(sc *storagev1.StorageClass) {
		sc.Provisioner = driver.SharedDriver
		delete(sc.Parameters, driver.FSTypeParam)
		sc.MountOptions = nil
	})
}

func (w *sharedWorld) claim(name, sc, size string, mode corev1.PersistentVolumeAccessMode, block bool, mutate ...func(*corev1.PersistentVolumeClaim)) *corev1.PersistentVolumeClaim {
	return w.pvc(name, sc, size, append([]func(*corev1.PersistentVolumeClaim){func(pvc *corev1.PersistentVolumeClaim) {
		pvc.Annotations = map[string]string{"volume.kubernetes.io/storage-provisioner": driver.SharedDriver, driver.SelectedNodeAnnotation: w.nodeA}
		pvc.Spec.AccessModes = []corev1.PersistentVolumeAccessMode{mode}
		if block {
			m := corev1.PersistentVolumeBlock
			pvc.Spec.VolumeMode = &m
		}
	}}, mutate...)...)
}

// TestSharedProvisioner: the shared driver's controller side, with the node agents played by the test.
func TestSharedProvisioner(t *testing.T) {
	w := newSharedWorld(t)
	ctx := context.Background()
	sc := w.storageClass()

	// A ReadWriteMany raw block volume (VM live migration): no node topology, work for a node in the lockspace.
	vmDisk := w.claim("vm-disk", sc, "1Gi", corev1.ReadWriteMany, true)
	pv := w.provisioned(vmDisk)
	if pv.Spec.NodeAffinity != nil || pv.Spec.CSI.Driver != driver.SharedDriver || !slices.Equal(pv.Spec.AccessModes, []corev1.PersistentVolumeAccessMode{corev1.ReadWriteMany}) {
		t.Errorf("PV: node affinity %+v, driver %s, access modes %v; want none, %s, [ReadWriteMany]", pv.Spec.NodeAffinity, pv.Spec.CSI.Driver, pv.Spec.AccessModes, driver.SharedDriver)
	}
	lv := w.logicalVolume(pv.Spec.CSI.VolumeHandle)
	worker := lv.Annotations[driver.SharedWorkerAnnotation]
	if lv.Spec.NodeName != "" || lv.Annotations[driver.SharedVolumeGroupAnnotation] != "san" || (worker != w.nodeA && worker != w.nodeB) ||
		!controllerutil.ContainsFinalizer(lv, w.names.LogicalVolumeFinalizer()) {
		t.Errorf("LogicalVolume %s: node %q, annotations %v, finalizers %v; want no node, volume group san, a joined worker, the finalizer",
			lv.Name, lv.Spec.NodeName, lv.Annotations, lv.Finalizers)
	}

	w.bind(vmDisk, pv)

	// Refusals the user can act on, each an event on the claim.
	fsRWX := w.claim("fs-rwx", sc, "1Gi", corev1.ReadWriteMany, false)
	w.waitWarning(fsRWX, "ReadWriteMany", "needs volumeMode: Block")
	tooBig := w.claim("too-big", sc, "20Gi", corev1.ReadWriteOnce, true)
	w.waitWarning(tooBig, "Not enough space", "shared volume group san has 10737418240 bytes free")
	clone := w.claim("clone", sc, "1Gi", corev1.ReadWriteOnce, true, func(pvc *corev1.PersistentVolumeClaim) {
		pvc.Spec.DataSource = &corev1.TypedLocalObjectReference{Kind: "PersistentVolumeClaim", Name: vmDisk.Name}
	})
	w.waitWarning(clone, "linear LVs without snapshots or clones")
	for _, pvc := range []*corev1.PersistentVolumeClaim{fsRWX, tooBig, clone} {
		w.noVolumeFor(pvc)
	}

	// CSIStorageCapacity: the volume group's free space on the nodes in its lockspace, by hostname.
	w.eventually("CSIStorageCapacity of the shared class", func() error {
		list := &storagev1.CSIStorageCapacityList{}
		if err := w.c.List(ctx, list, client.InNamespace(w.ns)); err != nil {
			return err
		}
		for _, c := range list.Items {
			if c.StorageClassName != sc {
				continue
			}
			want := metav1.LabelSelectorRequirement{Key: corev1.LabelHostname, Operator: metav1.LabelSelectorOpIn, Values: []string{w.nodeA + "-host", w.nodeB + "-host"}}
			if c.Capacity.Value() != 10<<30 || len(c.NodeTopology.MatchExpressions) != 1 || fmt.Sprint(c.NodeTopology.MatchExpressions[0]) != fmt.Sprint(want) {
				return fmt.Errorf("capacity %s on %+v; want 10Gi on %+v", c.Capacity, c.NodeTopology, want)
			}
			return nil
		}
		return fmt.Errorf("none for %s among %d", sc, len(list.Items))
	})

	// Active on node a: neither grown nor deleted; events say where it is active.
	id := pv.Spec.CSI.VolumeHandle
	w.report(w.nodeA, func(vg *lvmv2.VolumeGroupStatus) {
		vg.ActiveVolumes = []lvmv2.SharedActiveVolume{{Name: id, Mode: lvmv2.ActivationShared}}
	})
	if err := w.c.Get(ctx, client.ObjectKeyFromObject(vmDisk), vmDisk); err != nil {
		t.Fatal(err)
	}
	vmDisk.Spec.Resources.Requests[corev1.ResourceStorage] = resource.MustParse("2Gi")
	if err := w.c.Update(ctx, vmDisk); err != nil {
		t.Fatal(err)
	}
	w.waitWarning(vmDisk, "is active on "+w.nodeA+" (Shared)", "shared volumes grow offline")
	w.dropFinalizers(vmDisk)
	if err := w.c.Delete(ctx, vmDisk); err != nil {
		t.Fatal(err)
	}
	w.waitEvent(pv.UID, "is active on "+w.nodeA+" (Shared)", "removed once every node has unstaged it")
	if err := w.c.Get(ctx, client.ObjectKeyFromObject(lv), &topolvmv1.LogicalVolume{}); err != nil {
		t.Fatalf("the LogicalVolume of a volume active on a node: %v, want it kept", err)
	}

	// Unstaged everywhere, and its worker left the lockspace: another joined node removes it.
	w.report(worker, func(vg *lvmv2.VolumeGroupStatus) { vg.Lockspace = lvmv2.LockspaceNotJoined })
	w.report(w.nodeA, func(vg *lvmv2.VolumeGroupStatus) { vg.ActiveVolumes = nil })
	w.pvDeleted("PV of the unstaged volume deleted", pv)
	w.eventually("LogicalVolume removed", func() error {
		err := w.c.Get(ctx, client.ObjectKeyFromObject(lv), &topolvmv1.LogicalVolume{})
		if apierrors.IsNotFound(err) {
			return nil
		}
		return fmt.Errorf("still there: %v", err)
	})
	w.mu.Lock()
	workers := w.workedBy[lv.Name]
	w.mu.Unlock()
	if len(workers) != 2 || workers[0] != worker || workers[1] == worker || workers[1] == "shr-node-c" {
		t.Errorf("the volume's work was done by %v; want %s, then the other joined node once %s left the lockspace", workers, worker, worker)
	}

	// A node that died with a volume active: its host-ID Lease goes unrenewed, and after sanlock's host-dead
	// time its stale status no longer keeps the volume: it is deleted, by a live node.
	w.report(worker, func(vg *lvmv2.VolumeGroupStatus) { vg.Lockspace = lvmv2.LockspaceJoined })
	disk2 := w.claim("vm-disk-2", sc, "1Gi", corev1.ReadWriteOnce, true)
	pv2 := w.provisioned(disk2)
	id2 := pv2.Spec.CSI.VolumeHandle
	renewed := metav1.NewMicroTime(w.clock.Now())
	if err := w.c.Create(ctx, &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: w.ns, Name: "lvms-host-id-7"},
		Spec: coordinationv1.LeaseSpec{HolderIdentity: &w.nodeB, RenewTime: &renewed, LeaseDurationSeconds: ptr(int32(140))}}); err != nil {
		t.Fatal(err)
	}
	node := &lvmv2.LVMNode{}
	if err := w.c.Get(ctx, client.ObjectKey{Namespace: w.ns, Name: w.nodeB}, node); err != nil {
		t.Fatal(err)
	}
	node.Status.SharedLocking = &lvmv2.SharedLockingStatus{Mode: "Agent", HostID: 7}
	if err := w.c.Status().Update(ctx, node); err != nil {
		t.Fatal(err)
	}
	w.report(w.nodeB, func(vg *lvmv2.VolumeGroupStatus) {
		vg.ActiveVolumes = []lvmv2.SharedActiveVolume{{Name: id2, Mode: lvmv2.ActivationExclusive}}
	})
	w.dropFinalizers(disk2)
	if err := w.c.Delete(ctx, disk2); err != nil {
		t.Fatal(err)
	}
	w.waitEvent(pv2.UID, "is active on "+w.nodeB+" (Exclusive)")
	w.clock.SetTime(w.clock.Now().Add(171 * time.Second)) // no renewal for the host-dead time plus the skew: dead
	w.pvDeleted("PV of the volume a dead node had active deleted", pv2)
}

func ptr[T any](v T) *T { return &v }
