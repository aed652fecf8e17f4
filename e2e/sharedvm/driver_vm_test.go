package sharedvm

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	lvmv2 "github.com/lvms-dev/lvms/api/lvm/v2alpha1"
	"github.com/lvms-dev/lvms/api/topolvm/driver"
	topolvmv1 "github.com/lvms-dev/lvms/api/topolvm/v1"
	"github.com/lvms-dev/lvms/e2e/testenv"
	"github.com/lvms-dev/lvms/e2e/vm"
	"github.com/lvms-dev/lvms/operator/csicontroller"
	"github.com/lvms-dev/lvms/operator/optest"
	"github.com/lvms-dev/lvms/operator/provisioner"
)

// The shared driver's walk (TestVMSharedAgents, once both agents joined the lockspace): PVCs provisioned by
// the operator's shared provisioner on the host, LVs created by a worker agent in a VM, volumes staged
// through each agent's CSI node socket.
const (
	rwoClaim   = "rwo"
	rwxClaim   = "rwx"
	volSize    = 64 << 20
	dataBytes  = 4 << 20
	idsFile    = "volume-ids"
	sharedSock = "/run/lvms-test/shared-csi.sock"
)

// startSharedProvisioner runs the shared driver's controller service and provisioner on the host, as the
// operator's process does (cmd/lvms setupCSIController).
func startSharedProvisioner(t *testing.T, env *testenv.Env, ns string) {
	mgr, err := optest.Manager(t, env.Config, ns)
	if err != nil {
		t.Fatal(err)
	}
	names := driver.New(false)
	shared := csicontroller.NewShared(mgr.GetClient(), mgr.GetAPIReader(), csicontroller.Options{Names: names})
	p := provisioner.New(provisioner.Options{Names: names, CSI: shared, Shared: true, SharedCapacity: shared.Capacity, CapacityNamespace: ns,
		InUseRetry: 5 * time.Second})
	if err := p.SetupWithManager(mgr); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(log.IntoContext(context.Background(), mgr.GetLogger()))
	optest.Run(t, ctx, cancel, mgr)
}

// sharedClass waits for the StorageClass the operator made for the shared device class.
func (s *sharedNodes) sharedClass(t *testing.T) string {
	var sc string
	optest.Eventually(t, "the shared StorageClass", func() (bool, string) {
		list := &storagev1.StorageClassList{}
		if err := s.env.Client.List(context.Background(), list); err != nil {
			return false, err.Error()
		}
		for _, c := range list.Items {
			if c.Provisioner == driver.SharedDriver {
				sc = c.Name
				return true, ""
			}
		}
		return false, fmt.Sprintf("%d classes, none of %s", len(list.Items), driver.SharedDriver)
	})
	return sc
}

// claim creates a claim of the shared class, as a pod scheduled on node-a would (WaitForFirstConsumer).
func (s *sharedNodes) claim(t *testing.T, name string, mode corev1.PersistentVolumeAccessMode, volumeMode corev1.PersistentVolumeMode) *corev1.PersistentVolumeClaim {
	t.Helper()
	sc := s.sharedClass(t)
	pvc := &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Namespace: s.ns, Name: name,
		Annotations: map[string]string{driver.SelectedNodeAnnotation: s.nodes[0]}},
		Spec: corev1.PersistentVolumeClaimSpec{StorageClassName: &sc, AccessModes: []corev1.PersistentVolumeAccessMode{mode}, VolumeMode: &volumeMode,
			Resources: corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: *resource.NewQuantity(volSize, resource.BinarySI)}}}}
	if err := s.env.Client.Create(context.Background(), pvc); err != nil {
		t.Fatal(err)
	}
	return pvc
}

// provision creates a raw block claim per name and access mode and waits for each PV (no node affinity,
// the shared driver, the claim's access modes).
func (s *sharedNodes) provision(t *testing.T, claims map[string]corev1.PersistentVolumeAccessMode) map[string]*corev1.PersistentVolume {
	t.Helper()
	ctx := context.Background()
	started := time.Now()
	pvcs := map[string]*corev1.PersistentVolumeClaim{}
	for name, mode := range claims {
		pvcs[name] = s.claim(t, name, mode, corev1.PersistentVolumeBlock)
	}
	pvs := map[string]*corev1.PersistentVolume{}
	for name, pvc := range pvcs {
		pv := &corev1.PersistentVolume{}
		optest.Eventually(t, "the PV of claim "+name, func() (bool, string) {
			err := s.env.Client.Get(ctx, client.ObjectKey{Name: "pvc-" + string(pvc.UID)}, pv)
			return err == nil, fmt.Sprintf("%v; events of the claim: %s", err, strings.Join(eventsOf(t, s.env.Client, s.ns, name), "; "))
		})
		if pv.Spec.NodeAffinity != nil || pv.Spec.CSI.Driver != driver.SharedDriver || !slices.Equal(pv.Spec.AccessModes, pvc.Spec.AccessModes) {
			t.Errorf("PV %s: affinity %+v, driver %s, access modes %v; want no node affinity, %s, %v",
				pv.Name, pv.Spec.NodeAffinity, pv.Spec.CSI.Driver, pv.Spec.AccessModes, driver.SharedDriver, pvc.Spec.AccessModes)
		}
		pvs[name] = pv
	}
	t.Logf("%d shared volumes provisioned in %s (claim to PV, LV made by a node agent in a VM)", len(pvs), time.Since(started).Round(time.Millisecond))
	return pvs
}

// shareIDs hands the volume IDs to the guests and signals volumes-ready.
func (s *sharedNodes) shareIDs(t *testing.T, pvs map[string]*corev1.PersistentVolume) {
	t.Helper()
	var ids strings.Builder
	for name, pv := range pvs {
		fmt.Fprintf(&ids, "%s=%s\n", name, pv.Spec.CSI.VolumeHandle)
	}
	if err := os.WriteFile(filepath.Join(s.running.SharedDir(), idsFile), []byte(ids.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	s.running.Signal("volumes-ready")
}

// wait waits for a guest's signal.
func (s *sharedNodes) wait(t *testing.T, name string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	if err := s.running.WaitSignal(ctx, name); err != nil {
		t.Fatalf("wait for %q: %v", name, err)
	}
}

// driveSharedVolumes is the host's part: claims, checks of what an admin sees in the API, deletions.
func (s *sharedNodes) driveSharedVolumes(t *testing.T) {
	ctx := context.Background()
	c, ns, nodes := s.env.Client, s.ns, s.nodes
	wait := func(name string) { t.Helper(); s.wait(t, name) }
	started := time.Now()
	pvs := s.provision(t, map[string]corev1.PersistentVolumeAccessMode{rwoClaim: corev1.ReadWriteOnce, rwxClaim: corev1.ReadWriteMany})
	s.shareIDs(t, pvs)
	rwxFS := s.claim(t, "rwx-fs", corev1.ReadWriteMany, corev1.PersistentVolumeFilesystem)
	rwo := &corev1.PersistentVolumeClaim{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: rwoClaim}, rwo); err != nil {
		t.Fatal(err)
	}
	rwx := &corev1.PersistentVolumeClaim{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: rwxClaim}, rwx); err != nil {
		t.Fatal(err)
	}
	waitEvent(t, c, ns, rwxFS.Name, "ProvisioningFailed", "needs volumeMode: Block")
	optest.DeleteVolume(t, c, rwxFS) // a claim of the class would keep the set from being deleted

	// Where each volume is active, as the LVMNodes say.
	activeOn := func(id string) map[string]lvmv2.SharedActivationMode {
		out := map[string]lvmv2.SharedActivationMode{}
		for _, n := range nodes {
			var node lvmv2.LVMNode
			if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: n}, &node); err != nil {
				continue
			}
			for _, vg := range node.Status.VolumeGroups {
				for _, a := range vg.ActiveVolumes {
					if a.Name == id {
						out[n] = a.Mode
					}
				}
			}
		}
		return out
	}
	expectActive := func(id string, want map[string]lvmv2.SharedActivationMode) {
		t.Helper()
		optest.Eventually(t, fmt.Sprintf("volume %s active on %v", id, want), func() (bool, string) {
			got := activeOn(id)
			return fmt.Sprint(got) == fmt.Sprint(want), fmt.Sprint(got)
		})
	}
	wait("a-staged-rwo")
	t.Logf("claim created to first write on node-a (staged -aey, published, 4 MiB written with O_DIRECT): %s", time.Since(started).Round(time.Millisecond))
	expectActive(pvs[rwoClaim].Spec.CSI.VolumeHandle, map[string]lvmv2.SharedActivationMode{nodes[0]: lvmv2.ActivationExclusive})
	wait("b-read-rwo")
	expectActive(pvs[rwoClaim].Spec.CSI.VolumeHandle, map[string]lvmv2.SharedActivationMode{})

	// Offline expansion: the claim (bound here by hand: no kube-controller-manager) asks for more while no
	// node has the volume active.
	bind(t, c, rwo, pvs[rwoClaim])
	patch := client.MergeFrom(rwo.DeepCopy())
	rwo.Spec.Resources.Requests[corev1.ResourceStorage] = *resource.NewQuantity(2*volSize, resource.BinarySI)
	if err := c.Patch(ctx, rwo, patch); err != nil {
		t.Fatal(err)
	}
	optest.Eventually(t, "the rwo volume grown to 128Mi", func() (bool, string) {
		pv := &corev1.PersistentVolume{}
		if err := c.Get(ctx, client.ObjectKeyFromObject(pvs[rwoClaim]), pv); err != nil {
			return false, err.Error()
		}
		got := pv.Spec.Capacity[corev1.ResourceStorage]
		return got.Value() >= 2*volSize, got.String()
	})

	wait("b-read-rwx")
	rwxID := pvs[rwxClaim].Spec.CSI.VolumeHandle
	expectActive(rwxID, map[string]lvmv2.SharedActivationMode{nodes[0]: lvmv2.ActivationShared, nodes[1]: lvmv2.ActivationShared})
	// Deleting the claim while both nodes have the volume active: the PV stays, an event says where it is active.
	optest.DeleteVolume(t, c, rwx)
	waitEvent(t, c, "", pvs[rwxClaim].Name, "VolumeFailedDelete", "is active on "+nodes[0]+" (Shared), "+nodes[1]+" (Shared)")
	if err := c.Get(ctx, client.ObjectKeyFromObject(pvs[rwxClaim]), &corev1.PersistentVolume{}); err != nil {
		t.Fatalf("the PV of a volume active on two nodes: %v, want it kept", err)
	}
	s.running.Signal("rwx-delete-refused")
	wait("a-unstaged-rwx")
	wait("b-unstaged-rwx")
	optest.DeleteVolume(t, c, rwo)
	for _, pv := range pvs {
		optest.Eventually(t, "PV "+pv.Name+" and its LV removed", func() (bool, string) {
			cur := &corev1.PersistentVolume{}
			err := c.Get(ctx, client.ObjectKeyFromObject(pv), cur)
			if err == nil && cur.DeletionTimestamp != nil {
				optest.DeleteVolume(t, c, cur) // plays kube-controller-manager's pv-protection
			}
			lvs := &topolvmv1.LogicalVolumeList{}
			if lerr := c.List(ctx, lvs); lerr != nil {
				return false, lerr.Error()
			}
			for _, lv := range lvs.Items {
				if lv.Status.VolumeID == pv.Spec.CSI.VolumeHandle {
					return false, fmt.Sprintf("LogicalVolume %s still there: %+v", lv.Name, lv.Status)
				}
			}
			return apierrors.IsNotFound(err), fmt.Sprint(err)
		})
	}
	t.Log("both volumes removed once no node had them active")
}

// bind does what the PV controller would: the claim names its PV and is Bound.
func bind(t *testing.T, c client.Client, pvc *corev1.PersistentVolumeClaim, pv *corev1.PersistentVolume) {
	t.Helper()
	ctx := context.Background()
	if err := c.Get(ctx, client.ObjectKeyFromObject(pvc), pvc); err != nil {
		t.Fatal(err)
	}
	pvc.Spec.VolumeName = pv.Name
	if err := c.Update(ctx, pvc); err != nil {
		t.Fatal(err)
	}
	pvc.Status.Phase = corev1.ClaimBound
	pvc.Status.Capacity = pv.Spec.Capacity
	if err := c.Status().Update(ctx, pvc); err != nil {
		t.Fatal(err)
	}
}

// waitEvent waits for an event on the object named name with reason and a note containing text.
func waitEvent(t *testing.T, c client.Client, ns, name, reason, text string) {
	t.Helper()
	optest.Eventually(t, fmt.Sprintf("a %s event on %s saying %q", reason, name, text), func() (bool, string) {
		seen := eventsOf(t, c, ns, name)
		for _, e := range seen {
			if strings.HasPrefix(e, reason+": ") && strings.Contains(e, text) {
				return true, ""
			}
		}
		return false, strings.Join(seen, "; ")
	})
}

// eventsOf lists the events about the object named name ("reason: note" each); ns "" for any namespace.
func eventsOf(t *testing.T, c client.Client, ns, name string) []string {
	list := &eventsv1.EventList{}
	if err := c.List(context.Background(), list); err != nil {
		t.Logf("list events: %v", err)
		return nil
	}
	var seen []string
	for _, e := range list.Items {
		if e.Regarding.Name == name && (ns == "" || e.Regarding.Namespace == ns) {
			seen = append(seen, e.Reason+": "+e.Note)
		}
	}
	return seen
}

// guestSharedVolumes is each VM's part, through its node agent's CSI socket of the shared driver.
func guestSharedVolumes(t *testing.T) {
	g := newCSIGuest(t)
	switch vm.Role() {
	case "node-a":
		writeDirect(t, g.publish(rwoClaim, g.rwo), g.data)
		vm.Signal(t, "a-staged-rwo")
		vm.WaitSignal(t, "b-refused")
		g.release(rwoClaim)
		vm.Signal(t, "a-released-rwo")

		vm.WaitSignal(t, "b-read-rwo")
		dev := g.publish(rwxClaim, g.rwx)
		vm.Signal(t, "a-staged-rwx")
		vm.WaitSignal(t, "b-staged-rwx") // active on both now
		writeDirect(t, dev, g.data)
		vm.Signal(t, "a-wrote-rwx")
		vm.WaitSignal(t, "rwx-delete-refused")
		g.release(rwxClaim)
		vm.Signal(t, "a-unstaged-rwx")
	case "node-b":
		vm.WaitSignal(t, "a-staged-rwo")
		err := g.stage(rwoClaim, g.rwo)
		if status.Code(err) != codes.FailedPrecondition || !strings.Contains(err.Error(), "another node holds it") {
			t.Fatalf("staging %s on node-b while node-a has it: %v, want FailedPrecondition naming another node's lock", rwoClaim, err)
		}
		t.Logf("staging refused while node-a holds the volume: %v", err)
		vm.Signal(t, "b-refused")

		vm.WaitSignal(t, "a-released-rwo")
		g.expectData(g.publish(rwoClaim, g.rwo), rwoClaim+" moved from node-a to node-b")
		g.release(rwoClaim)
		vm.Signal(t, "b-read-rwo")

		vm.WaitSignal(t, "a-staged-rwx")
		dev := g.publish(rwxClaim, g.rwx)
		vm.Signal(t, "b-staged-rwx")
		vm.WaitSignal(t, "a-wrote-rwx")
		g.expectData(dev, rwxClaim+" active on both nodes: node-b reads node-a's O_DIRECT write")
		vm.Signal(t, "b-read-rwx")
		vm.WaitSignal(t, "rwx-delete-refused")
		g.release(rwxClaim)
		vm.Signal(t, "b-unstaged-rwx")
	}
}
