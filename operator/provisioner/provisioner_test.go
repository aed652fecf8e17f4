package provisioner_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	"github.com/lvms-dev/lvms/api/topolvm/driver"
	topolvmv1 "github.com/lvms-dev/lvms/api/topolvm/v1"
	"github.com/lvms-dev/lvms/e2e/csidriver"
	"github.com/lvms-dev/lvms/e2e/testenv"
	"github.com/lvms-dev/lvms/operator/provisioner"
)

// suite is one driver (current or legacy group) with two simulated nodes. There is no kubelet, scheduler,
// kube-controller-manager or snapshot-controller: the tests play them — they set selected-node, bind PVCs
// to PVs, and create VolumeSnapshotContents — and the node agents' LogicalVolume reconcilers run in
// process against lvmsim, whose state (not its commands) the tests check.
type suite struct {
	t      *testing.T
	d      *csidriver.Driver
	c      client.Client
	names  driver.Names
	ns     string
	nodeA  string
	nodeB  string
	prefix string
	// clock decides the node-loss grace period; tests step it.
	clock *clocktesting.FakeClock
}

// callTimeout bounds the suite's CSI calls: long enough for a volume on a live node even on a loaded machine,
// short enough that testDeadNode's calls to a node without an agent end within its waits.
const callTimeout = 3 * time.Second

func newSuite(t *testing.T, legacy bool) *suite {
	testenv.Require(t)
	names := driver.New(legacy)
	prefix := "cur"
	if legacy {
		prefix = "leg"
	}
	s := &suite{t: t, names: names, ns: env.Namespace(t), prefix: prefix, nodeA: prefix + "-node-a", nodeB: prefix + "-node-b",
		clock: clocktesting.NewFakeClock(time.Date(2031, 5, 6, 7, 8, 9, 0, time.UTC))}
	s.d = csidriver.Start(t, env.Config, csidriver.Options{Names: names, Nodes: []string{s.nodeA, s.nodeB},
		Setup: func(mgr manager.Manager, d *csidriver.Driver) error {
			return provisioner.New(provisioner.Options{Names: names, CSI: d.Controller, CapacityNamespace: s.ns, Snapshots: true,
				CallTimeout: callTimeout, Clock: s.clock}).SetupWithManager(mgr)
		}})
	scheme, err := names.Scheme()
	if err != nil {
		t.Fatal(err)
	}
	if s.c, err = client.New(env.Config, client.Options{Scheme: scheme}); err != nil {
		t.Fatal(err)
	}
	return s
}

func (s *suite) eventually(what string, f func() error) {
	s.t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	var err error
	for time.Now().Before(deadline) {
		if err = f(); err == nil {
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
	s.t.Fatalf("%s: still not true after 30s: %v", what, err)
}

func (s *suite) storageClass(dc string, wffc bool, mutate ...func(*storagev1.StorageClass)) string {
	s.t.Helper()
	mode := storagev1.VolumeBindingImmediate
	if wffc {
		mode = storagev1.VolumeBindingWaitForFirstConsumer
	}
	expand := true
	sc := &storagev1.StorageClass{ObjectMeta: metav1.ObjectMeta{GenerateName: s.prefix + "-" + dc + "-"}, Provisioner: s.names.Driver(),
		Parameters:        map[string]string{s.names.DeviceClassParam(): dc, driver.FSTypeParam: "xfs"},
		VolumeBindingMode: &mode, AllowVolumeExpansion: &expand, MountOptions: []string{"noatime"}}
	for _, m := range mutate {
		m(sc)
	}
	if err := s.c.Create(context.Background(), sc); err != nil {
		s.t.Fatal(err)
	}
	s.t.Cleanup(func() { _ = s.c.Delete(context.Background(), sc) })
	return sc.Name
}

func (s *suite) pvc(name, sc, size string, mutate ...func(*corev1.PersistentVolumeClaim)) *corev1.PersistentVolumeClaim {
	s.t.Helper()
	pvc := &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Namespace: s.ns, Name: name,
		Annotations: map[string]string{"volume.kubernetes.io/storage-provisioner": s.names.Driver()}},
		Spec: corev1.PersistentVolumeClaimSpec{StorageClassName: &sc, AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			Resources: corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse(size)}}}}
	for _, m := range mutate {
		m(pvc)
	}
	if err := s.c.Create(context.Background(), pvc); err != nil {
		s.t.Fatal(err)
	}
	return pvc
}

// podUsing creates a pod that uses the claim on node, as the scheduler would have placed it.
func (s *suite) podUsing(pvc *corev1.PersistentVolumeClaim, node string) *corev1.Pod {
	s.t.Helper()
	ctx := context.Background()
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: s.ns, Name: "default"}}
	if err := s.c.Create(ctx, sa); err != nil && !apierrors.IsAlreadyExists(err) {
		s.t.Fatal(err)
	}
	no := false
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: s.ns, GenerateName: "app-"}, Spec: corev1.PodSpec{
		NodeName: node, AutomountServiceAccountToken: &no,
		Containers: []corev1.Container{{Name: "app", Image: "registry.invalid/app"}},
		Volumes: []corev1.Volume{{Name: "data", VolumeSource: corev1.VolumeSource{
			PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: pvc.Name}}}}}}
	if err := s.c.Create(ctx, pod); err != nil {
		s.t.Fatal(err)
	}
	return pod
}

// dropFinalizers plays kube-controller-manager's pvc-protection controller.
func (s *suite) dropFinalizers(pvc *corev1.PersistentVolumeClaim) {
	s.t.Helper()
	if err := s.c.Patch(context.Background(), pvc, client.RawPatch(types.MergePatchType, []byte(`{"metadata":{"finalizers":null}}`))); err != nil {
		s.t.Fatal(err)
	}
}

// selectNode plays the scheduler.
func (s *suite) selectNode(pvc *corev1.PersistentVolumeClaim, node string) {
	s.t.Helper()
	patch := fmt.Sprintf(`{"metadata":{"annotations":{%q:%q}}}`, driver.SelectedNodeAnnotation, node)
	if err := s.c.Patch(context.Background(), pvc, client.RawPatch(types.MergePatchType, []byte(patch))); err != nil {
		s.t.Fatal(err)
	}
}

// provisioned waits for the PVC's PV.
func (s *suite) provisioned(pvc *corev1.PersistentVolumeClaim) *corev1.PersistentVolume {
	s.t.Helper()
	pv := &corev1.PersistentVolume{}
	s.eventually("PV of "+pvc.Name+" created", func() error {
		return s.c.Get(context.Background(), types.NamespacedName{Name: "pvc-" + string(pvc.UID)}, pv)
	})
	return pv
}

// bind plays the PV controller.
func (s *suite) bind(pvc *corev1.PersistentVolumeClaim, pv *corev1.PersistentVolume) {
	s.t.Helper()
	ctx := context.Background()
	if err := s.c.Get(ctx, client.ObjectKeyFromObject(pvc), pvc); err != nil {
		s.t.Fatal(err)
	}
	pvc.Spec.VolumeName = pv.Name
	if err := s.c.Update(ctx, pvc); err != nil {
		s.t.Fatal(err)
	}
	pvc.Status.Phase = corev1.ClaimBound
	pvc.Status.Capacity = pv.Spec.Capacity
	if err := s.c.Status().Update(ctx, pvc); err != nil {
		s.t.Fatal(err)
	}
}

// pvDeleted waits until the PV is gone, playing the pv-protection controller once the deleter deleted it.
func (s *suite) pvDeleted(what string, pv *corev1.PersistentVolume) {
	s.t.Helper()
	ctx := context.Background()
	s.eventually(what, func() error {
		err := s.c.Get(ctx, client.ObjectKeyFromObject(pv), pv)
		switch {
		case apierrors.IsNotFound(err):
			return nil
		case err != nil:
			return err
		case pv.DeletionTimestamp != nil:
			return s.c.Patch(ctx, pv, client.RawPatch(types.MergePatchType, []byte(`{"metadata":{"finalizers":null}}`)))
		}
		return fmt.Errorf("PV %s is not being deleted", pv.Name)
	})
}

func (s *suite) logicalVolume(volumeID string) *topolvmv1.LogicalVolume {
	s.t.Helper()
	list := &topolvmv1.LogicalVolumeList{}
	if err := s.c.List(context.Background(), list); err != nil {
		s.t.Fatal(err)
	}
	for i := range list.Items {
		if list.Items[i].Status.VolumeID == volumeID {
			return &list.Items[i]
		}
	}
	s.t.Fatalf("no LogicalVolume has volume ID %s", volumeID)
	return nil
}

// warnings returns the warning events' notes about a PVC.
func (s *suite) warnings(pvc *corev1.PersistentVolumeClaim) []string {
	list := &eventsv1.EventList{}
	if err := s.c.List(context.Background(), list, client.InNamespace(s.ns)); err != nil {
		s.t.Fatal(err)
	}
	var out []string
	for _, e := range list.Items {
		if e.Regarding.UID == pvc.UID && e.Type == corev1.EventTypeWarning {
			out = append(out, e.Note)
		}
	}
	return out
}

func (s *suite) waitWarning(pvc *corev1.PersistentVolumeClaim, contains ...string) string {
	s.t.Helper()
	var found string
	s.eventually("warning event on "+pvc.Name+" containing "+strings.Join(contains, ", "), func() error {
		for _, w := range s.warnings(pvc) {
			ok := true
			for _, c := range contains {
				ok = ok && strings.Contains(w, c)
			}
			if ok {
				found = w
				return nil
			}
		}
		return fmt.Errorf("warnings: %q", s.warnings(pvc))
	})
	return found
}

func TestProvisioner(t *testing.T) {
	for _, legacy := range []bool{false, true} {
		name := "topolvm.io"
		if legacy {
			name = "legacy topolvm.cybozu.com"
		}
		t.Run(name, func(t *testing.T) {
			s := newSuite(t, legacy)
			t.Run("thick volume: WaitForFirstConsumer, resize, delete", s.testThickLifecycle)
			t.Run("thin: snapshot, restore and clone", s.testThinSnapshotRestoreClone)
			t.Run("too big for any node: event names the shortfall", s.testTooBig)
			t.Run("thin pool past its threshold: the claim is told why", s.testThinPoolPastThreshold)
			t.Run("bad input: events a user can act on", s.testBadInput)
			t.Run("capacity published per node and StorageClass", s.testCapacity)
			t.Run("TopoLVM's capacity objects taken over in place", s.testCapacityAdoption)
			t.Run("StorageClass in TopoLVM's shape provisions", s.testTopoLVMStorageClass)
			t.Run("TopoLVM's deprecated claim finalizer removed", s.testDeprecatedClaimFinalizer)
			t.Run("node gone: LogicalVolumes released, claim told", s.testNodeGone)
			t.Run("tenant isolation: clone, restore and resize only through the volume's own claim", s.testTenantIsolation)
			t.Run("a node without an agent holds up no other node", s.testDeadNode)
			t.Run("node lost: asked-for deletions released after the grace period, nothing else", s.testNodeLost)
		})
	}
}
