package sharedvm

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	certv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	lvmv2 "github.com/lvms-dev/lvms/api/lvm/v2alpha1"
	moveapi "github.com/lvms-dev/lvms/api/move"
	"github.com/lvms-dev/lvms/api/topolvm/driver"
	topolvmv1 "github.com/lvms-dev/lvms/api/topolvm/v1"
	"github.com/lvms-dev/lvms/e2e/testenv"
	"github.com/lvms-dev/lvms/e2e/vm"
	"github.com/lvms-dev/lvms/nodeagent/transfer"
	"github.com/lvms-dev/lvms/operator/move"
	opnames "github.com/lvms-dev/lvms/operator/names"
	"github.com/lvms-dev/lvms/operator/optest"
	"github.com/lvms-dev/lvms/operator/transferca"
)

// TestVMMovePVC's cluster: two nodes with a local disk each, one thick device class on it.
const (
	mvNodeA     = "node-a"
	mvNodeB     = "node-b"
	mvVG        = "vg-move"
	mvClass     = "local"
	mvSerial    = "movedisk"
	mvPort      = 9443
	mvSize      = 1 << 30
	mvClaim     = "data"
	mvLabel     = "test.lvms.io/move"
	envMvListen = "LVMS_MOVE_LISTEN_HOST" // the guest's own address: its agent's receiver listens there
	envMvPeer   = "LVMS_MOVE_PEER_HOST"   // node-a only: node-b's address, which node-a's agent is told to send to
	envMvRelay  = "LVMS_MOVE_RELAY"       // node-a only: where node-a reaches node-b's receiver (the host's relay)
	mvSourceID  = "move-source-volume-id" // shared files
	mvTargetID  = "move-target-volume-id"
	mvManifest  = "move-manifest.json"
	mvSourceSum = "move-source-sha256"
)

// TestVMMovePVC moves a volume between two nodes as a user sees it, every part being the product's own
// process: two VMs, each running `lvms nodeagent` (as the node agent's ServiceAccount bound to its node,
// with only the RBAC of deploy/nodeagent), and `lvms operator` on the host with its move controller and
// transfer certificate signer. Node A holds a 1 GiB LVMS volume with an ext4 file system and files; the
// claim is moved to node B (move.Request, what `lvms move pvc` writes). The operator creates the target
// LogicalVolume on B, B's agent its LV; both agents get transfer certificates from the operator through
// CSRs, B's receiver publishes its address, A's agent sends over mutual TLS, both report the SHA-256 of
// the whole volume (which is the one A's guest computed), and the operator swaps the claim onto the new PV
// (AwaitingConfirmation). B mounts the new LV read-only and every file hashes as written on A; the source
// LV is still on A and the source PV is Retain. move.Confirm: Done, the source PV's policy is Delete again.
//
// The network: each guest reaches only the host's API server and, for A, the host's relay into B's
// receiver port. B's agent publishes its own address; A's guest test puts that address on its loopback and
// relays it to the host, so A's agent dials exactly what B published.
func TestVMMovePVC(t *testing.T) {
	if vm.InGuest() {
		switch vm.Role() {
		case mvNodeA:
			mvSourceGuest(t)
		case mvNodeB:
			mvTargetGuest(t)
		}
		return
	}
	begin := time.Now()
	bin := buildBinary(t)
	nodes := []string{mvNodeA, mvNodeB}
	env, ns, opts := startCluster(t, nodes, "")
	ctx := context.Background()
	names := driver.New(false)
	c := env.Client

	// The networks: the API server for both; A's port 9443 to the host's relay, which is B's port 9443.
	apiAddr := strings.TrimSuffix(strings.TrimPrefix(env.Config.Host, "https://"), "/")
	relay := vm.FreeHostAddr(t)
	netA := &vm.Network{Subnet: netip.MustParsePrefix("10.200.51.0/24"),
		ToHost: []vm.Forward{{GuestPort: apiPort, HostAddr: apiAddr}, {GuestPort: mvPort, HostAddr: relay}}}
	netB := &vm.Network{Subnet: netip.MustParsePrefix("10.200.52.0/24"),
		ToHost: []vm.Forward{{GuestPort: apiPort, HostAddr: apiAddr}}, FromHost: []vm.Forward{{GuestPort: mvPort, HostAddr: relay}}}
	for i, n := range []*vm.Network{netA, netB} {
		opts[i].Network = n
		opts[i].Disks = []vm.Disk{{Size: mvSize + 512<<20, Serial: mvSerial}}
		opts[i].MemoryMiB = 1024
		opts[i].Timeout = 35 * time.Minute
		opts[i].Env[envAPI] = fmt.Sprintf("https://%s:%d", n.HostSide(), apiPort)
		opts[i].Env[envBinary] = bin
		opts[i].Env[envMvListen] = n.Guest().String()
	}
	opts[0].Env[envMvPeer] = netB.Guest().String()
	opts[0].Env[envMvRelay] = fmt.Sprintf("%s:%d", netA.HostSide(), mvPort)

	// The agents act as the node agent's ServiceAccount with deploy/nodeagent's ClusterRole and Role.
	mvBindAgentRBAC(t, c, ns)
	for _, n := range nodes {
		optest.Node(t, c, n, map[string]string{mvLabel: "yes"})
	}
	set := &lvmv2.LVMNodeSet{ObjectMeta: metav1.ObjectMeta{Name: "local", Namespace: ns},
		Spec: lvmv2.LVMNodeSetSpec{
			NodeSelector: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchExpressions: []corev1.NodeSelectorRequirement{
				{Key: mvLabel, Operator: corev1.NodeSelectorOpIn, Values: []string{"yes"}}}}}},
			Template: lvmv2.LVMNodeSpec{
				VolumeGroups: []lvmv2.VolumeGroup{{Name: mvVG, DeviceSelector: lvmv2.DeviceSelector{DeviceSelectorTerms: []lvmv2.DeviceSelectorTerm{{
					MatchExpressions: []lvmv2.DeviceSelectorRequirement{{Key: lvmv2.KeyPath, Operator: lvmv2.OpIn, Values: []string{"/dev/disk/by-id/virtio-" + mvSerial}}}}}}}},
				DeviceClasses: []lvmv2.DeviceClass{{Name: mvClass, Strategy: lvmv2.StrategyThick, VolumeGroup: mvVG, FilesystemType: "ext4"}},
			},
		}}
	must(t, c.Create(ctx, set))
	startOperator(t, bin, env.Kubeconfig(t), ns)
	running := vm.StartMany(t, opts)
	defer running.Wait()
	defer running.Signal("move-finished")
	shared := func(name, value string) {
		t.Helper()
		must(t, os.WriteFile(filepath.Join(running.SharedDir(), name), []byte(value), 0o644))
	}
	waitGuest := func(name string, timeout time.Duration) {
		t.Helper()
		wctx, cancel := context.WithTimeout(ctx, timeout)
		defer cancel()
		if err := running.WaitSignal(wctx, name); err != nil {
			t.Fatalf("wait for %q: %v", name, err)
		}
	}
	poll := func(what string, timeout, every time.Duration, cond func() (bool, string)) {
		t.Helper()
		var last string
		for deadline := time.Now().Add(timeout); ; time.Sleep(every) {
			ok, state := cond()
			if ok {
				return
			}
			if state != last {
				t.Logf("waiting for %s: %s", what, state)
				last = state
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: not after %s: %s", what, timeout, state)
			}
		}
	}

	// Both nodes have the device class: their agents made the volume group and annotated their Node with
	// its capacity, which is what the move's preflight reads.
	poll("the device class on both nodes", 12*time.Minute, 5*time.Second, func() (bool, string) {
		var states []string
		ready := true
		for _, n := range nodes {
			node := &corev1.Node{}
			must(t, c.Get(ctx, client.ObjectKey{Name: n}, node))
			capacity, ok := node.Annotations[names.CapacityAnnotation(mvClass)]
			ready = ready && ok
			states = append(states, fmt.Sprintf("%s capacity %q", n, capacity))
		}
		return ready, strings.Join(states, ", ")
	})
	t.Logf("both nodes serve device class %s (%s after start)", mvClass, time.Since(begin).Round(time.Second))

	// The source volume on node A, as the provisioner makes it: a LogicalVolume (node A's agent creates the
	// LV), its PV and a claim bound to it.
	sourceLV := &topolvmv1.LogicalVolume{ObjectMeta: metav1.ObjectMeta{Name: "pvc-move-source"},
		Spec: topolvmv1.LogicalVolumeSpec{Name: "pvc-move-source", NodeName: mvNodeA, Size: *resource.NewQuantity(mvSize, resource.BinarySI), DeviceClass: mvClass}}
	must(t, c.Create(ctx, sourceLV))
	poll("the source LogicalVolume's volume ID", 5*time.Minute, 2*time.Second, func() (bool, string) {
		must(t, c.Get(ctx, client.ObjectKeyFromObject(sourceLV), sourceLV))
		return sourceLV.Status.VolumeID != "", fmt.Sprintf("status %+v", sourceLV.Status)
	})
	sourceID := sourceLV.Status.VolumeID
	sc := "lvms-" + mvClass
	pvc := &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: mvClaim, Labels: map[string]string{"app": "db"}},
		Spec: corev1.PersistentVolumeClaimSpec{StorageClassName: &sc, AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			Resources: corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: *resource.NewQuantity(mvSize, resource.BinarySI)}}, VolumeName: sourceLV.Name}}
	must(t, c.Create(ctx, pvc))
	sourceClaimUID := pvc.UID
	fs := corev1.PersistentVolumeFilesystem
	sourcePV := &corev1.PersistentVolume{ObjectMeta: metav1.ObjectMeta{Name: sourceLV.Name},
		Spec: corev1.PersistentVolumeSpec{
			Capacity:                      corev1.ResourceList{corev1.ResourceStorage: *resource.NewQuantity(mvSize, resource.BinarySI)},
			AccessModes:                   []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			PersistentVolumeReclaimPolicy: corev1.PersistentVolumeReclaimDelete, StorageClassName: sc, VolumeMode: &fs,
			ClaimRef:               &corev1.ObjectReference{Kind: "PersistentVolumeClaim", Namespace: ns, Name: mvClaim, UID: pvc.UID},
			PersistentVolumeSource: corev1.PersistentVolumeSource{CSI: &corev1.CSIPersistentVolumeSource{Driver: names.Driver(), VolumeHandle: sourceID, FSType: "ext4"}},
			NodeAffinity: &corev1.VolumeNodeAffinity{Required: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{
				MatchExpressions: []corev1.NodeSelectorRequirement{{Key: names.TopologyKey(), Operator: corev1.NodeSelectorOpIn, Values: []string{mvNodeA}}}}}}},
		}}
	must(t, c.Create(ctx, sourcePV))
	pvc.Status.Phase = corev1.ClaimBound
	must(t, c.Status().Update(ctx, pvc))

	// Node A's guest makes the file system and writes the files.
	shared(mvSourceID, sourceID)
	running.Signal("source-created")
	waitGuest("source-written", 15*time.Minute)
	srcSum, err := os.ReadFile(filepath.Join(running.SharedDir(), mvSourceSum))
	must(t, err)

	// The user asks for the move, as `lvms move pvc data --to-node node-b` does.
	key := types.NamespacedName{Namespace: ns, Name: mvClaim}
	requested := time.Now()
	must(t, move.Request(ctx, c, key, mvNodeB))
	t.Logf("move of %s to %s requested", key, mvNodeB)
	kcm := func() { mvKCM(t, c, key) }
	phases := map[moveapi.Phase]time.Time{}
	marks := map[string]time.Time{} // "copied": the receiver's high-water mark at the end; "reported": both digests
	var st moveapi.Status
	await := func(want moveapi.Phase, timeout time.Duration) {
		t.Helper()
		var lastLog string
		for deadline := time.Now().Add(timeout); ; time.Sleep(2 * time.Second) {
			kcm()
			got, ok, err := move.GetStatus(ctx, c, key)
			if err != nil && !strings.Contains(err.Error(), "does not exist") { // the claim is recreated in the swap
				t.Fatal(err)
			}
			if ok {
				st = got
			}
			if _, seen := phases[st.Phase]; !seen && st.Phase != "" {
				phases[st.Phase] = time.Now()
				t.Logf("%s after the request: phase %s %s", time.Since(requested).Round(time.Second), st.Phase, st.Message)
			}
			if st.Phase == moveapi.PhaseRefused || st.Phase == moveapi.PhaseAborted {
				t.Fatalf("the move was %s: %+v", st.Phase, st)
			}
			if st.Phase == want {
				return
			}
			l, copied, reported := mvProgress(ctx, c, st)
			for mark, ok := range map[string]bool{"copied": copied, "reported": reported} {
				if _, seen := marks[mark]; ok && !seen {
					marks[mark] = time.Now()
				}
			}
			if l != lastLog {
				t.Logf("%s after the request: %s", time.Since(requested).Round(time.Second), l)
				lastLog = l
			}
			if time.Now().After(deadline) {
				l, _, _ := mvProgress(ctx, c, st)
				t.Fatalf("the move did not reach %s within %s: %+v; %s", want, timeout, st, l)
			}
		}
	}
	await(moveapi.PhaseAwaitingConfirmation, 30*time.Minute)
	// The figures (the phases are polled every 2 s: Swapping may pass between two polls).
	since := func(from, to time.Time) string {
		if from.IsZero() || to.IsZero() {
			return "?"
		}
		return to.Sub(from).Round(time.Second).String()
	}
	figures := fmt.Sprintf("request→Copying %s; Copying→all %d MiB copied %s; copied→both SHA-256 reported %s; reported→AwaitingConfirmation %s; request→AwaitingConfirmation %s",
		since(requested, phases[moveapi.PhaseCopying]), mvSize>>20, since(phases[moveapi.PhaseCopying], marks["copied"]), since(marks["copied"], marks["reported"]),
		since(marks["reported"], phases[moveapi.PhaseAwaitingConfirmation]), since(requested, phases[moveapi.PhaseAwaitingConfirmation]))
	t.Logf("AwaitingConfirmation: %s", figures)

	// What the user sees: the claim is a new claim bound to the new PV on node B; the digest both agents
	// reported is the one node A's guest computed of the source; the source is kept, Retain.
	if st.SHA256 != strings.TrimSpace(string(srcSum)) {
		t.Errorf("the move's SHA-256 is %q; node A's guest computed %q for the source LV", st.SHA256, srcSum)
	}
	claim := &corev1.PersistentVolumeClaim{}
	must(t, c.Get(ctx, key, claim))
	if claim.Spec.VolumeName != st.TargetPV || claim.UID == sourceClaimUID || claim.Status.Phase != corev1.ClaimBound {
		t.Fatalf("the claim is bound to %q (uid %s, phase %s), want the new volume %s and a new claim", claim.Spec.VolumeName, claim.UID, claim.Status.Phase, st.TargetPV)
	}
	newPV := &corev1.PersistentVolume{}
	must(t, c.Get(ctx, client.ObjectKey{Name: st.TargetPV}, newPV))
	target := &topolvmv1.LogicalVolume{}
	must(t, c.Get(ctx, client.ObjectKey{Name: st.TargetPV}, target))
	if target.Spec.NodeName != mvNodeB || newPV.Spec.CSI == nil || newPV.Spec.CSI.VolumeHandle != target.Status.VolumeID || newPV.Spec.ClaimRef == nil || newPV.Spec.ClaimRef.UID != claim.UID {
		t.Fatalf("the new PV %s (handle %v, claimRef %+v) does not name node B's LogicalVolume %s (node %s, volume ID %s) for the new claim %s",
			newPV.Name, newPV.Spec.CSI, newPV.Spec.ClaimRef, target.Name, target.Spec.NodeName, target.Status.VolumeID, claim.UID)
	}
	if na := newPV.Spec.NodeAffinity; na == nil || na.Required == nil || len(na.Required.NodeSelectorTerms) != 1 ||
		len(na.Required.NodeSelectorTerms[0].MatchExpressions) != 1 || !slices.Equal(na.Required.NodeSelectorTerms[0].MatchExpressions[0].Values, []string{mvNodeB}) {
		t.Errorf("the new PV's node affinity is %+v, want node %s", newPV.Spec.NodeAffinity, mvNodeB)
	}
	must(t, c.Get(ctx, client.ObjectKeyFromObject(sourcePV), sourcePV))
	if sourcePV.Spec.PersistentVolumeReclaimPolicy != corev1.PersistentVolumeReclaimRetain {
		t.Errorf("before confirmation the source PV's reclaim policy is %s, want Retain", sourcePV.Spec.PersistentVolumeReclaimPolicy)
	}
	must(t, c.Get(ctx, client.ObjectKeyFromObject(sourceLV), sourceLV))
	for _, lv := range []*topolvmv1.LogicalVolume{sourceLV, target} {
		if got := lv.Annotations[moveapi.AnnotationSHA256]; got != st.ID+":"+st.SHA256 {
			t.Errorf("LogicalVolume %s (node %s) reports SHA-256 %q, want %q", lv.Name, lv.Spec.NodeName, got, st.ID+":"+st.SHA256)
		}
	}
	// The operator's signer issued each agent its certificate, for the node its identity is bound to.
	csrs := &certv1.CertificateSigningRequestList{}
	must(t, c.List(ctx, csrs))
	agentUser := "system:serviceaccount:" + ns + ":" + opnames.NodeAgent
	issued := map[string]bool{}
	for _, csr := range csrs.Items {
		node := csr.Spec.Extra[transferca.NodeNameExtra]
		if csr.Spec.SignerName == transferca.SignerName && csr.Spec.Username == agentUser && len(node) == 1 && len(csr.Status.Certificate) > 0 {
			issued[node[0]] = true
		}
	}
	if !issued[mvNodeA] || !issued[mvNodeB] {
		t.Errorf("transfer certificates issued for %v, want both %s and %s", issued, mvNodeA, mvNodeB)
	}

	// Node B's guest reads the files from the new LV; node A's still has the source LV.
	shared(mvTargetID, target.Status.VolumeID)
	running.Signal("awaiting-confirmation")
	waitGuest("target-verified", 10*time.Minute)
	waitGuest("source-kept", 5*time.Minute)

	// The user confirms: the source PV gets its Delete policy back.
	confirmed := time.Now()
	must(t, move.Confirm(ctx, c, key, st.ID))
	await(moveapi.PhaseDone, 5*time.Minute)
	must(t, c.Get(ctx, client.ObjectKeyFromObject(sourcePV), sourcePV))
	if sourcePV.Spec.PersistentVolumeReclaimPolicy != corev1.PersistentVolumeReclaimDelete {
		t.Errorf("after confirmation the source PV's reclaim policy is %s, want Delete", sourcePV.Spec.PersistentVolumeReclaimPolicy)
	}
	t.Logf("figures, move of a %d MiB volume with an ext4 file system between two software-emulated VMs: %s; confirmation→Done %s; whole test %s",
		mvSize>>20, figures, since(confirmed, phases[moveapi.PhaseDone]), time.Since(begin).Round(time.Second))
}

// mvProgress is the move's state as the claim and its LogicalVolumes show it, for the log; copied once the
// receiver's high-water mark is at the end, reported once both agents reported the move's SHA-256.
func mvProgress(ctx context.Context, c client.Client, st moveapi.Status) (line string, copied, reported bool) {
	parts := []string{fmt.Sprintf("phase %q, progress %q, message %q", st.Phase, st.Progress, st.Message)}
	if st.TargetPV == "" {
		return parts[0], false, false
	}
	reported = true
	for _, name := range []string{"pvc-move-source", st.TargetPV} {
		lv := &topolvmv1.LogicalVolume{}
		if err := c.Get(ctx, client.ObjectKey{Name: name}, lv); err != nil {
			parts = append(parts, fmt.Sprintf("%s: %v", name, err))
			reported = false
			continue
		}
		s := fmt.Sprintf("%s on %s: volumeID %q", name, lv.Spec.NodeName, lv.Status.VolumeID)
		for _, k := range []string{transfer.AnnotationReceiver, moveapi.AnnotationProgress, moveapi.AnnotationSHA256, moveapi.AnnotationCopyError} {
			if v := lv.Annotations[k]; v != "" {
				s += fmt.Sprintf(", %s=%q", k[strings.LastIndex(k, "/")+1:], v)
			}
		}
		if p := lv.Annotations[moveapi.AnnotationProgress]; p != "" {
			n, total, _ := strings.Cut(p, "/")
			copied = copied || n == total
		}
		reported = reported && strings.HasPrefix(lv.Annotations[moveapi.AnnotationSHA256], st.ID+":")
		parts = append(parts, s)
	}
	return strings.Join(parts, "; "), copied, reported
}

// mvKCM plays kube-controller-manager for the claim: a claim being deleted that no pod uses loses its
// pvc-protection finalizer; a claim naming a PV pre-bound to it becomes Bound.
func mvKCM(t *testing.T, c client.Client, key types.NamespacedName) {
	t.Helper()
	ctx := context.Background()
	pvc := &corev1.PersistentVolumeClaim{}
	if err := c.Get(ctx, key, pvc); apierrors.IsNotFound(err) {
		return
	} else if err != nil {
		t.Fatal(err)
	}
	if !pvc.DeletionTimestamp.IsZero() {
		if len(pvc.Finalizers) > 0 { // no pod exists in this cluster
			pvc.Finalizers = nil
			if err := c.Update(ctx, pvc); err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
				t.Fatal(err)
			}
		}
		return
	}
	if pvc.Status.Phase != corev1.ClaimBound && pvc.Spec.VolumeName != "" {
		pv := &corev1.PersistentVolume{}
		if err := c.Get(ctx, client.ObjectKey{Name: pvc.Spec.VolumeName}, pv); err == nil && pv.Spec.ClaimRef != nil && pv.Spec.ClaimRef.UID == pvc.UID {
			pvc.Status.Phase = corev1.ClaimBound
			if err := c.Status().Update(ctx, pvc); err != nil && !apierrors.IsConflict(err) {
				t.Fatal(err)
			}
		}
	}
}

// mvBindAgentRBAC grants the node agent's ServiceAccount in ns the ClusterRole and Role of deploy/nodeagent.
func mvBindAgentRBAC(t *testing.T, c client.Client, ns string) {
	t.Helper()
	read := func(name string, into any) {
		raw, err := os.ReadFile(filepath.Join(testenv.RepoRoot(), "deploy", "nodeagent", name))
		must(t, err)
		must(t, yaml.Unmarshal(raw, into))
	}
	subject := []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: ns, Name: opnames.NodeAgent}}
	clusterRole, role := &rbacv1.ClusterRole{}, &rbacv1.Role{}
	read("clusterrole.yaml", clusterRole)
	read("role.yaml", role)
	clusterRole.ObjectMeta = metav1.ObjectMeta{Name: ns + "-node-agent"}
	role.ObjectMeta = metav1.ObjectMeta{Name: opnames.NodeAgent + "-test", Namespace: ns}
	objs := []client.Object{clusterRole, role,
		&rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: ns + "-node-agent"}, Subjects: subject,
			RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: clusterRole.Name}},
		&rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: opnames.NodeAgent + "-test", Namespace: ns}, Subjects: subject,
			RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: role.Name}},
	}
	for _, o := range objs {
		must(t, c.Create(context.Background(), o))
		t.Cleanup(func() { _ = c.Delete(context.Background(), o) })
	}
}

// startMoveAgent runs the lvms binary's node agent as the node agent's ServiceAccount bound to this node:
// the kubeconfig has the admin's client certificate impersonate that user with the node-name extra a
// pod-bound token carries, which the operator's transfer signer requires. Its receiver listens on the
// guest's own address, port 9443.
func startMoveAgent(t *testing.T) {
	t.Helper()
	dec := func(k string) []byte {
		b, err := decodeEnv(k)
		must(t, err)
		return b
	}
	ns := os.Getenv(envNamespace)
	kubeconfig := filepath.Join(t.TempDir(), "kubeconfig")
	cfg := clientcmdapi.Config{
		Clusters: map[string]*clientcmdapi.Cluster{"host": {Server: os.Getenv(envAPI), CertificateAuthorityData: dec(envCA), TLSServerName: "localhost"}},
		AuthInfos: map[string]*clientcmdapi.AuthInfo{"host": {ClientCertificateData: dec(envCert), ClientKeyData: dec(envKey),
			Impersonate:          "system:serviceaccount:" + ns + ":" + opnames.NodeAgent,
			ImpersonateUserExtra: map[string][]string{transferca.NodeNameExtra: {vm.Role()}}}},
		Contexts:       map[string]*clientcmdapi.Context{"host": {Cluster: "host", AuthInfo: "host"}},
		CurrentContext: "host",
	}
	must(t, clientcmd.WriteToFile(cfg, kubeconfig))
	lvmdDir := t.TempDir()
	cmd := exec.Command(os.Getenv(envBinary), "nodeagent", "--kubeconfig", kubeconfig, "--node-name", vm.Role(),
		"--namespace", ns, "--host-nsenter=false", "--lvm-devices-file=lvms.devices",
		"--lvmd-config", filepath.Join(lvmdDir, "lvmd.yaml"), "--health-probe-bind-address=0", "--diagnostics-bind-address=0",
		"--shared-csi-socket=", "--kubelet-registration-dir=",
		"--transfer-listen-host="+os.Getenv(envMvListen), fmt.Sprintf("--transfer-port=%d", mvPort),
		"--transfer-progress-dir="+filepath.Join(lvmdDir, "transfer"))
	startProcess(t, cmd)
}

// mvRun runs a guest command, failing the test when it fails.
func mvRun(t *testing.T, name string, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	out, err := exec.CommandContext(ctx, name, args...).CombinedOutput()
	if err != nil {
		t.Fatalf("%s %s: %v: %s", name, strings.Join(args, " "), err, out)
	}
	return string(out)
}

// mvShared reads a file the host wrote in the shared directory.
func mvShared(t *testing.T, name string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(vm.SharedDir(), name))
	must(t, err)
	return strings.TrimSpace(string(b))
}

// mvWaitDevice waits for the agent's LV device.
func mvWaitDevice(t *testing.T, dev string) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Minute); ; time.Sleep(time.Second) {
		if _, err := os.Stat(dev); err == nil {
			return
		} else if time.Now().After(deadline) {
			t.Fatalf("no device %s: %v", dev, err)
		}
	}
}

// mvRelay makes node B's published receiver address reachable from node A: the address goes on A's
// loopback, and every connection to it on the receiver's port is relayed to the host's forward into B.
func mvRelay(t *testing.T) {
	t.Helper()
	peer, upstream := os.Getenv(envMvPeer), os.Getenv(envMvRelay)
	mvRun(t, "ip", "addr", "add", peer+"/32", "dev", "lo")
	l, err := net.Listen("tcp", net.JoinHostPort(peer, fmt.Sprint(mvPort)))
	must(t, err)
	var wg sync.WaitGroup
	t.Cleanup(func() { _ = l.Close(); wg.Wait() })
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			in, err := l.Accept()
			if err != nil {
				return
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				defer in.Close()
				out, err := net.Dial("tcp", upstream)
				if err != nil {
					t.Logf("relay to %s: %v", upstream, err)
					return
				}
				defer out.Close()
				done := make(chan struct{}, 2)
				pipe := func(dst, src net.Conn) {
					_, _ = io.Copy(dst, src)
					if tc, ok := dst.(*net.TCPConn); ok {
						_ = tc.CloseWrite()
					}
					done <- struct{}{}
				}
				go pipe(out, in)
				go pipe(in, out)
				<-done
				<-done
			}()
		}
	}()
	t.Logf("relaying %s:%d to %s", peer, mvPort, upstream)
}

// mvSourceGuest is node A: its agent creates the source LV; the guest writes an ext4 file system with
// files on it, then the move runs and the source LV must stay.
func mvSourceGuest(t *testing.T) {
	startMoveAgent(t)
	mvRelay(t)
	vm.WaitSignal(t, "source-created")
	dev := "/dev/" + mvVG + "/" + mvShared(t, mvSourceID)
	mvWaitDevice(t, dev)
	mvRun(t, "mkfs.ext4", "-q", dev)
	dir := t.TempDir()
	mvRun(t, "mount", dev, dir)
	sums := map[string]string{}
	rng := rand.NewChaCha8([32]byte{7})
	total := 0
	for i := range 6 {
		b := make([]byte, (i+1)*6<<20) // 6 to 36 MiB, 126 MiB in all
		_, _ = rng.Read(b)
		name := fmt.Sprintf("file-%02d", i)
		must(t, os.WriteFile(filepath.Join(dir, name), b, 0o644))
		s := sha256.Sum256(b)
		sums[name] = hex.EncodeToString(s[:])
		total += len(b)
	}
	mvRun(t, "umount", dir)
	manifest, err := json.Marshal(sums)
	must(t, err)
	must(t, os.WriteFile(filepath.Join(vm.SharedDir(), mvManifest), manifest, 0o644))
	start := time.Now()
	sum := mvDeviceSHA256(t, dev)
	t.Logf("wrote %d files (%d MiB) on %s; SHA-256 of the whole LV %s (read in %s)", len(sums), total>>20, dev, sum, time.Since(start).Round(time.Second))
	must(t, os.WriteFile(filepath.Join(vm.SharedDir(), mvSourceSum), []byte(sum), 0o644))
	vm.Signal(t, "source-written")

	vm.WaitSignal(t, "awaiting-confirmation")
	disks, err := vm.Disks()
	if err != nil || len(disks) != 1 {
		t.Fatalf("disks %v: %v", disks, err)
	}
	out := mvRun(t, "lvs", "--devices", disks[0], "--noheadings", "-o", "lv_name,lv_size", mvVG)
	if !strings.Contains(out, filepath.Base(dev)) {
		t.Fatalf("before confirmation the source LV %s is gone from node A: lvs says %q", dev, out)
	}
	t.Logf("node A keeps the source LV: %s", strings.TrimSpace(out))
	vm.Signal(t, "source-kept")
	vm.WaitSignal(t, "move-finished")
}

// mvTargetGuest is node B: its agent creates the target LV and receives into it; once the claim is
// swapped the guest mounts the new LV read-only and checks every file.
func mvTargetGuest(t *testing.T) {
	startMoveAgent(t)
	vm.WaitSignal(t, "awaiting-confirmation")
	dev := "/dev/" + mvVG + "/" + mvShared(t, mvTargetID)
	mvWaitDevice(t, dev)
	var sums map[string]string
	must(t, json.Unmarshal([]byte(mvShared(t, mvManifest)), &sums))
	mvRun(t, "fsck.ext4", "-n", "-f", dev)
	dir := t.TempDir()
	mvRun(t, "mount", "-o", "ro", dev, dir)
	defer mvRun(t, "umount", dir)
	for name, want := range sums {
		b, err := os.ReadFile(filepath.Join(dir, name))
		must(t, err)
		if got := sha256.Sum256(b); hex.EncodeToString(got[:]) != want {
			t.Fatalf("%s on node B has SHA-256 %x; on node A it had %s", name, got, want)
		}
	}
	t.Logf("all %d files on node B's new LV %s hash as written on node A", len(sums), dev)
	vm.Signal(t, "target-verified")
	vm.WaitSignal(t, "move-finished")
}

// mvDeviceSHA256 is the SHA-256 of a whole device.
func mvDeviceSHA256(t *testing.T, dev string) string {
	t.Helper()
	f, err := os.Open(dev)
	must(t, err)
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil && !errors.Is(err, io.EOF) {
		t.Fatalf("read %s: %v", dev, err)
	}
	return hex.EncodeToString(h.Sum(nil))
}
