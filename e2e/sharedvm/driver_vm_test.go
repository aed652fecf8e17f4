package sharedvm

import (
	"context"
	"crypto/sha256"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
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
	p := provisioner.New(provisioner.Options{Names: names, CSI: shared, Shared: true, SharedCapacity: shared.Capacity, CapacityNamespace: ns})
	if err := p.SetupWithManager(mgr); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(log.IntoContext(context.Background(), mgr.GetLogger()))
	optest.Run(t, ctx, cancel, mgr)
}

// driveSharedVolumes is the host's part: claims, checks of what an admin sees in the API, deletions.
func driveSharedVolumes(t *testing.T, env *testenv.Env, ns string, running *vm.Running, nodes []string) {
	ctx := context.Background()
	c := env.Client
	wait := func(name string) {
		t.Helper()
		wctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
		defer cancel()
		if err := running.WaitSignal(wctx, name); err != nil {
			t.Fatalf("wait for %q: %v", name, err)
		}
	}
	var sc string
	optest.Eventually(t, "the shared StorageClass", func() (bool, string) {
		list := &storagev1.StorageClassList{}
		if err := c.List(ctx, list); err != nil {
			return false, err.Error()
		}
		for _, s := range list.Items {
			if s.Provisioner == driver.SharedDriver {
				sc = s.Name
				return true, ""
			}
		}
		return false, fmt.Sprintf("%d classes, none of %s", len(list.Items), driver.SharedDriver)
	})
	block := corev1.PersistentVolumeBlock
	claim := func(name string, mode corev1.PersistentVolumeAccessMode, volumeMode corev1.PersistentVolumeMode) *corev1.PersistentVolumeClaim {
		pvc := &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name,
			// WaitForFirstConsumer: the scheduler picked node-a for the first pod.
			Annotations: map[string]string{driver.SelectedNodeAnnotation: nodes[0]}},
			Spec: corev1.PersistentVolumeClaimSpec{StorageClassName: &sc, AccessModes: []corev1.PersistentVolumeAccessMode{mode}, VolumeMode: &volumeMode,
				Resources: corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: *resource.NewQuantity(volSize, resource.BinarySI)}}}}
		if err := c.Create(ctx, pvc); err != nil {
			t.Fatal(err)
		}
		return pvc
	}
	started := time.Now()
	rwo := claim(rwoClaim, corev1.ReadWriteOnce, block)
	rwx := claim(rwxClaim, corev1.ReadWriteMany, block)
	rwxFS := claim("rwx-fs", corev1.ReadWriteMany, corev1.PersistentVolumeFilesystem)

	pvs := map[string]*corev1.PersistentVolume{}
	for _, pvc := range []*corev1.PersistentVolumeClaim{rwo, rwx} {
		pv := &corev1.PersistentVolume{}
		optest.Eventually(t, "the PV of claim "+pvc.Name, func() (bool, string) {
			err := c.Get(ctx, client.ObjectKey{Name: "pvc-" + string(pvc.UID)}, pv)
			return err == nil, fmt.Sprintf("%v; events of the claim: %s", err, strings.Join(eventsOf(t, c, ns, pvc.Name), "; "))
		})
		if pv.Spec.NodeAffinity != nil || pv.Spec.CSI.Driver != driver.SharedDriver || !slices.Equal(pv.Spec.AccessModes, pvc.Spec.AccessModes) {
			t.Errorf("PV %s: affinity %+v, driver %s, access modes %v; want no node affinity, %s, %v",
				pv.Name, pv.Spec.NodeAffinity, pv.Spec.CSI.Driver, pv.Spec.AccessModes, driver.SharedDriver, pvc.Spec.AccessModes)
		}
		pvs[pvc.Name] = pv
	}
	t.Logf("two shared volumes provisioned in %s (claim to PV, LV made by a node agent in a VM)", time.Since(started).Round(time.Millisecond))
	ids := fmt.Sprintf("%s=%s\n%s=%s\n", rwoClaim, pvs[rwoClaim].Spec.CSI.VolumeHandle, rwxClaim, pvs[rwxClaim].Spec.CSI.VolumeHandle)
	if err := os.WriteFile(filepath.Join(running.SharedDir(), idsFile), []byte(ids), 0o644); err != nil {
		t.Fatal(err)
	}
	running.Signal("volumes-ready")
	waitEvent(t, c, ns, rwxFS.Name, "ProvisioningFailed", "needs volumeMode: Block")

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
	running.Signal("rwx-delete-refused")
	wait("a-unstaged-rwx")
	wait("b-unstaged-rwx")
	optest.DeleteVolume(t, c, rwo)
	for _, pv := range pvs {
		optest.Eventually(t, "PV "+pv.Name+" and its LV removed", func() (bool, string) {
			err := c.Get(ctx, client.ObjectKeyFromObject(pv), &corev1.PersistentVolume{})
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
	conn, err := grpc.NewClient("unix://"+sharedSock, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	node := csi.NewNodeClient(conn)
	ctx := context.Background()

	vm.WaitSignal(t, "volumes-ready")
	b, err := os.ReadFile(filepath.Join(vm.SharedDir(), idsFile))
	if err != nil {
		t.Fatal(err)
	}
	ids := map[string]string{}
	for _, line := range strings.Fields(string(b)) {
		k, v, _ := strings.Cut(line, "=")
		ids[k] = v
	}
	data := make([]byte, dataBytes)
	rng := rand.New(rand.NewPCG(1, 2))
	for i := range data {
		data[i] = byte(rng.Uint32())
	}
	want := sha256.Sum256(data)
	capability := func(mode csi.VolumeCapability_AccessMode_Mode) *csi.VolumeCapability {
		return &csi.VolumeCapability{AccessType: &csi.VolumeCapability_Block{Block: &csi.VolumeCapability_BlockVolume{}},
			AccessMode: &csi.VolumeCapability_AccessMode{Mode: mode}}
	}
	rwoCap, rwxCap := capability(csi.VolumeCapability_AccessMode_SINGLE_NODE_WRITER), capability(csi.VolumeCapability_AccessMode_MULTI_NODE_MULTI_WRITER)
	dir := t.TempDir()
	staging := func(id string) string { return filepath.Join(dir, "staging-"+id) }
	target := func(id string) string { return filepath.Join(dir, "target-"+id) }
	stage := func(claim string, c *csi.VolumeCapability) error {
		_, err := node.NodeStageVolume(ctx, &csi.NodeStageVolumeRequest{VolumeId: ids[claim], StagingTargetPath: staging(ids[claim]), VolumeCapability: c})
		return err
	}
	// publish stages and publishes, as the kubelet does for a pod, and returns the block device's path.
	publish := func(claim string, c *csi.VolumeCapability) string {
		t.Helper()
		must(t, stage(claim, c))
		_, err := node.NodePublishVolume(ctx, &csi.NodePublishVolumeRequest{VolumeId: ids[claim], StagingTargetPath: staging(ids[claim]),
			TargetPath: target(ids[claim]), VolumeCapability: c})
		must(t, err)
		return target(ids[claim])
	}
	release := func(claim string) {
		t.Helper()
		_, err := node.NodeUnpublishVolume(ctx, &csi.NodeUnpublishVolumeRequest{VolumeId: ids[claim], TargetPath: target(ids[claim])})
		must(t, err)
		_, err = node.NodeUnstageVolume(ctx, &csi.NodeUnstageVolumeRequest{VolumeId: ids[claim], StagingTargetPath: staging(ids[claim])})
		must(t, err)
	}
	switch vm.Role() {
	case "node-a":
		writeDirect(t, publish(rwoClaim, rwoCap), data)
		vm.Signal(t, "a-staged-rwo")
		vm.WaitSignal(t, "b-refused")
		release(rwoClaim)
		vm.Signal(t, "a-released-rwo")

		vm.WaitSignal(t, "b-read-rwo")
		dev := publish(rwxClaim, rwxCap)
		vm.Signal(t, "a-staged-rwx")
		vm.WaitSignal(t, "b-staged-rwx") // active on both now
		writeDirect(t, dev, data)
		vm.Signal(t, "a-wrote-rwx")
		vm.WaitSignal(t, "rwx-delete-refused")
		release(rwxClaim)
		vm.Signal(t, "a-unstaged-rwx")
	case "node-b":
		vm.WaitSignal(t, "a-staged-rwo")
		err := stage(rwoClaim, rwoCap)
		if status.Code(err) != codes.FailedPrecondition || !strings.Contains(err.Error(), "another node holds it") {
			t.Fatalf("staging %s on node-b while node-a has it: %v, want FailedPrecondition naming another node's lock", rwoClaim, err)
		}
		t.Logf("staging refused while node-a holds the volume: %v", err)
		vm.Signal(t, "b-refused")

		vm.WaitSignal(t, "a-released-rwo")
		dev := publish(rwoClaim, rwoCap)
		if got := sha256.Sum256(readDirect(t, dev, dataBytes)); got != want {
			t.Fatalf("%s on node-b: checksum %x, node-a wrote %x", rwoClaim, got, want)
		}
		t.Logf("%s moved from node-a to node-b with the same checksum %x", rwoClaim, want[:8])
		release(rwoClaim)
		vm.Signal(t, "b-read-rwo")

		vm.WaitSignal(t, "a-staged-rwx")
		dev = publish(rwxClaim, rwxCap)
		vm.Signal(t, "b-staged-rwx")
		vm.WaitSignal(t, "a-wrote-rwx")
		if got := sha256.Sum256(readDirect(t, dev, dataBytes)); got != want {
			t.Fatalf("%s read on node-b while active on both: checksum %x, node-a wrote %x", rwxClaim, got, want)
		}
		t.Logf("%s active on both nodes: node-b reads node-a's O_DIRECT write, checksum %x", rwxClaim, want[:8])
		vm.Signal(t, "b-read-rwx")
		vm.WaitSignal(t, "rwx-delete-refused")
		release(rwxClaim)
		vm.Signal(t, "b-unstaged-rwx")
	}
}
