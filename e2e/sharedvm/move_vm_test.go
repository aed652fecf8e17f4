package sharedvm

import (
	"cmp"
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
	mvSize      = 64 << 20 // small: every byte crosses software emulation (about 2 MB/s), twice and hashed
	mvClaim     = "data"
	mvLabel     = "test.lvms.io/move"
	mvPod       = "writer-0"
	mvHoldFin   = "test.lvms.io/hold-deletion" // keeps the claim while node b writes behind the fence
	envMvListen = "LVMS_MOVE_LISTEN_HOST"      // the guest's own address: its agent's receiver listens there
	envMvPeer   = "LVMS_MOVE_PEER_HOST"        // the other node's address, which this node's agent is told to send to
	envMvRelay  = "LVMS_MOVE_RELAY"            // where this node reaches the other's receiver (the host's relay)
	mvSourceID  = "move-source-volume-id"      // shared files
	mvTargetID  = "move-target-volume-id"
	mvManifest  = "move-manifest.json"
	mvSourceSum = "move-source-sha256"
	mvPhase     = "move-phase"    // the move's phase as the host last read it, for the pods' attempts
	mvAcked     = "acked-%s.json" // every write a pod had acknowledged, per node
	mvAttempts  = "attempts.json" // node a's pod's attempts after its restart
)

// TestVMMovePVC moves a volume between two nodes as a user sees it, every part being the product's own
// process: two VMs, each running `lvms nodeagent` (as the node agent's ServiceAccount bound to its node,
// with only the RBAC of deploy/nodeagent), and `lvms operator` on the host with its move controller and
// transfer certificate signer. Node A holds a 64 MiB LVMS volume with an ext4 file system and files.
//
// A pod writes the volume while the move runs: it is running, published through A's agent's CSI socket as
// kubelet publishes, when the move is requested (the move waits, saying where the volume is still
// published), it stops, and it is restarted over and over at every phase of the move; every write it had
// acknowledged (written and synced) is recorded. The operator creates the target LogicalVolume on B, B's
// agent its LV; both agents get transfer certificates through CSRs, B's receiver publishes its address, A's
// agent sends over mutual TLS, both report the SHA-256 of the whole volume, the claim is deleted, A's agent
// reads the source again, and the claim comes back on the new PV (AwaitingConfirmation). Every restart of the
// pod on A was refused, naming the move, and the move's status named the pod. On B a pod publishes the new
// volume: every file and every acknowledged write is there, and its own writes are acknowledged; the source
// on A hashes as the move reported. move.Confirm: Done, the source PV's policy is Delete again.
//
// Then the claim moves back to A while something gets past the hold on B (a mount of the device itself,
// not through CSI) after the copy: the verification after the claim's release sees the change, the claim
// goes back to its own volume on B, bound, and the move ends Aborted saying why; B's pod finds that write
// and everything before it.
//
// The network: each guest reaches only the host's API server and the host's relay into the other's
// receiver port. A receiving agent publishes its own address; the sending guest's test puts that address on
// its loopback and relays it to the host (mvRelay), so the sending agent dials exactly what was published.
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
	t.Parallel()
	begin := time.Now()
	bin := buildBinary(t)
	nodes := []string{mvNodeA, mvNodeB}
	env, ns, opts := startCluster(t, nodes, "")
	ctx := context.Background()
	names := driver.New(false)
	c := env.Client

	// The networks: the API server for both; A's port 9443 to the host's relay, which is B's port 9443, and
	// B's port 9443 to the host's relay back, which is A's port 9443.
	apiAddr := strings.TrimSuffix(strings.TrimPrefix(env.Config.Host, "https://"), "/")
	relayAB, relayBA := vm.FreeHostAddr(t), vm.FreeHostAddr(t)
	netA := &vm.Network{Subnet: netip.MustParsePrefix("10.200.51.0/24"),
		ToHost:   []vm.Forward{{GuestPort: apiPort, HostAddr: apiAddr}, {GuestPort: mvPort, HostAddr: relayAB}},
		FromHost: []vm.Forward{{GuestPort: mvPort, HostAddr: relayBA}}}
	netB := &vm.Network{Subnet: netip.MustParsePrefix("10.200.52.0/24"),
		ToHost:   []vm.Forward{{GuestPort: apiPort, HostAddr: apiAddr}, {GuestPort: mvPort + 1, HostAddr: relayBA}},
		FromHost: []vm.Forward{{GuestPort: mvPort, HostAddr: relayAB}}}
	for i, n := range []*vm.Network{netA, netB} {
		opts[i].Network = n
		opts[i].Disks = []vm.Disk{{Size: 2*mvSize + 512<<20, Serial: mvSerial}} // both volumes fit on either node
		opts[i].MemoryMiB = 1024
		opts[i].Timeout = 45 * time.Minute
		opts[i].Env[envAPI] = fmt.Sprintf("https://%s:%d", n.HostSide(), apiPort)
		opts[i].Env[envBinary] = bin
		opts[i].Env[envMvListen] = n.Guest().String()
	}
	opts[0].Env[envMvPeer] = netB.Guest().String()
	opts[0].Env[envMvRelay] = fmt.Sprintf("%s:%d", netA.HostSide(), mvPort)
	opts[1].Env[envMvPeer] = netA.Guest().String()
	opts[1].Env[envMvRelay] = fmt.Sprintf("%s:%d", netB.HostSide(), mvPort+1)

	// The agents act as the node agent's ServiceAccount with deploy/nodeagent's ClusterRole and Role.
	mvBindAgentRBAC(t, c, ns)
	for _, n := range nodes {
		optest.Node(t, c, n, map[string]string{mvLabel: "yes"})
		optest.Ready(t, c, n) // no kubelet here: lift the not-ready taint, which the move's preflight refuses
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
	sharedDir := running.SharedDir()
	shared := func(name, value string) { // written whole or not at all: a guest may read it any time
		t.Helper()
		tmp := filepath.Join(sharedDir, "."+name+".tmp")
		must(t, os.WriteFile(tmp, []byte(value), 0o644))
		must(t, os.Rename(tmp, filepath.Join(sharedDir, name)))
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

	// Node A's guest makes the file system and writes the files; then its pod starts writing.
	shared(mvSourceID, sourceID)
	running.Signal("source-created")
	waitGuest("source-written", 15*time.Minute)
	running.Signal("pod-start")
	waitGuest("pod-running", 5*time.Minute)

	// The user asks for the move, as `lvms move pvc data --to-node node-b` does.
	key := types.NamespacedName{Namespace: ns, Name: mvClaim}
	requested := time.Now()
	must(t, move.Request(ctx, c, key, mvNodeB))
	t.Logf("move of %s to %s requested while its pod writes it on %s", key, mvNodeB, mvNodeA)
	kcm := func() { mvKCM(t, c, key) }
	phases := map[moveapi.Phase]time.Time{}
	marks := map[string]time.Time{} // "copied": the receiver's high-water mark at the end; "reported": both digests
	var messages []string
	var st moveapi.Status
	await := func(want moveapi.Phase, timeout time.Duration, between func()) {
		t.Helper()
		var lastLog string
		for deadline := time.Now().Add(timeout); ; time.Sleep(2 * time.Second) {
			kcm()
			if between != nil {
				between()
			}
			got, ok, err := move.GetStatus(ctx, c, key)
			if err != nil && !strings.Contains(err.Error(), "does not exist") { // the claim is recreated in the swap
				t.Fatal(err)
			}
			if ok {
				st = got
			}
			// The pods' attempts are tagged with the phase the move's record holds: the claim shows none
			// while the swap has it deleted.
			if phase := recordPhase(ctx, c, st.SourcePV); phase != "" {
				shared(mvPhase, string(phase))
			}
			if ok {
				if len(messages) == 0 || messages[len(messages)-1] != st.Message {
					messages = append(messages, st.Message)
				}
			}
			if _, seen := phases[st.Phase]; !seen && st.Phase != "" {
				phases[st.Phase] = time.Now()
				t.Logf("%s after the request: phase %s %s", time.Since(requested).Round(time.Second), st.Phase, st.Message)
			}
			if st.Phase == want {
				return
			}
			if st.Phase == moveapi.PhaseRefused || st.Phase == moveapi.PhaseAborted {
				t.Fatalf("the move was %s: %+v", st.Phase, st)
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

	// The pod still has the volume: the move holds it and waits, saying where it is published. The pod
	// stops (its controller restarts it at once, over and over).
	poll("the move waiting for the pod's publication to go", 10*time.Minute, 2*time.Second, func() (bool, string) {
		got, _, err := move.GetStatus(ctx, c, key)
		must(t, err)
		st = got
		return st.Phase == moveapi.PhaseCreatingTarget && strings.Contains(st.Message, "the volume is still published at "+mvPodTarget(sourceLV.Name)), fmt.Sprintf("%+v", st)
	})
	t.Logf("the move waits for the pod: %s", st.Message)
	shared(mvPhase, string(st.Phase))
	running.Signal("pod-stop")
	await(moveapi.PhaseAwaitingConfirmation, 35*time.Minute, nil)
	// The figures (the phases are polled every 2 s: Swapping may pass between two polls).
	since := func(from, to time.Time) string {
		if from.IsZero() || to.IsZero() {
			return "?"
		}
		return to.Sub(from).Round(time.Second).String()
	}
	figures := fmt.Sprintf("request→Copying %s; Copying→all %d MiB copied %s; copied→both SHA-256 reported %s; reported→AwaitingConfirmation %s (the claim released, the source read again); request→AwaitingConfirmation %s",
		since(requested, phases[moveapi.PhaseCopying]), mvSize>>20, since(phases[moveapi.PhaseCopying], marks["copied"]), since(marks["copied"], marks["reported"]),
		since(marks["reported"], phases[moveapi.PhaseAwaitingConfirmation]), since(requested, phases[moveapi.PhaseAwaitingConfirmation]))
	t.Logf("AwaitingConfirmation: %s", figures)

	// Node A's pod: every restart was refused, naming the move (once more now that the claim is on the new
	// volume); the move named the pod.
	waitGuest("pod-refused-after-swap", 5*time.Minute)
	running.Signal("pod-end")
	waitGuest("pod-ended", 5*time.Minute)
	var attempts []mvAttempt
	readShared(t, sharedDir, mvAttempts, &attempts)
	refusedIn := map[string]int{}
	for _, a := range attempts {
		if a.Err == "" {
			t.Errorf("node a's pod published the held source volume during %s: the move's source was writable", a.Phase)
			continue
		}
		if !strings.Contains(a.Err, "source of volume move "+st.ID) {
			t.Errorf("node a's pod was refused during %s with %q, which does not name the move %s", a.Phase, a.Err, st.ID)
		}
		refusedIn[a.Phase]++
	}
	t.Logf("node a's pod restarts refused, by phase: %v", refusedIn)
	for _, p := range []moveapi.Phase{moveapi.PhaseCreatingTarget, moveapi.PhaseCopying, moveapi.PhaseSwapping, moveapi.PhaseAwaitingConfirmation} {
		if refusedIn[string(p)] == 0 {
			t.Errorf("no restart of the pod was tried during %s (attempts by phase: %v)", p, refusedIn)
		}
	}
	if !slices.ContainsFunc(messages, func(m string) bool {
		return strings.Contains(m, "Pod "+ns+"/"+mvPod+" tried to use the claim on "+mvNodeA+" and was refused")
	}) {
		t.Errorf("the move's status never named the refused pod; its messages: %q", messages)
	}

	// What the user sees: the claim is a new claim bound to the new PV on node B; the source is kept, Retain.
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
	if got := sourceLV.Annotations[moveapi.AnnotationVerified]; got != st.ID+":"+st.SHA256 {
		t.Errorf("node a's agent verified the released source as %q, want the copy's %q", got, st.ID+":"+st.SHA256)
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

	// Node B's pod finds every file and every write node A's pod had acknowledged, and writes; node A still
	// has the source LV, whose SHA-256 is the move's.
	shared(mvTargetID, target.Status.VolumeID)
	running.Signal("awaiting-confirmation")
	waitGuest("target-verified", 10*time.Minute)
	waitGuest("source-kept", 10*time.Minute)
	if got := strings.TrimSpace(readSharedString(t, sharedDir, mvSourceSum)); got != st.SHA256 {
		t.Errorf("node a's source LV hashes %s after the move; the move copied %s", got, st.SHA256)
	}

	// The user confirms: the source PV gets its Delete policy back and the source is released.
	confirmed := time.Now()
	must(t, move.Confirm(ctx, c, key, st.ID))
	await(moveapi.PhaseDone, 5*time.Minute, nil)
	t.Logf("figures, move of a %d MiB volume with an ext4 file system between two software-emulated VMs: %s; confirmation→Done %s",
		mvSize>>20, figures, since(confirmed, phases[moveapi.PhaseDone]))

	// The move back to A, with a write behind the fence on B after the copy: the claim is kept from going
	// (a finalizer standing in for a slow pod) until B wrote, then released; the verification finds the
	// change and the claim goes back to its own volume on B.
	first := st
	addFinalizer(t, c, key, mvHoldFin)
	phases = map[moveapi.Phase]time.Time{}
	requested = time.Now()
	must(t, move.Request(ctx, c, key, mvNodeA))
	t.Logf("move of %s back to %s requested", key, mvNodeA)
	wroteBehind := false
	await(moveapi.PhaseAborted, 35*time.Minute, func() {
		if wroteBehind {
			return
		}
		cur := &corev1.PersistentVolumeClaim{}
		if err := c.Get(ctx, key, cur); err != nil || cur.DeletionTimestamp.IsZero() {
			return
		}
		running.Signal("write-behind")
		waitGuest("written-behind", 5*time.Minute)
		removeFinalizer(t, c, key, mvHoldFin)
		wroteBehind = true
	})
	if !wroteBehind || !strings.Contains(st.Message, "the source changed after it was copied") || !strings.Contains(st.Message, "goes back to its own volume on "+mvNodeB) {
		t.Fatalf("the move back ended %+v (wrote behind the fence: %v); want Aborted saying the source changed and the claim went back", st, wroteBehind)
	}
	poll("the claim bound to its own volume again", 2*time.Minute, 2*time.Second, func() (bool, string) {
		kcm()
		cur := &corev1.PersistentVolumeClaim{}
		if err := c.Get(ctx, key, cur); err != nil {
			return false, err.Error()
		}
		return cur.Spec.VolumeName == first.TargetPV && cur.Status.Phase == corev1.ClaimBound, fmt.Sprintf("claim on %q, %s", cur.Spec.VolumeName, cur.Status.Phase)
	})
	must(t, c.Get(ctx, key, claim))
	must(t, c.Get(ctx, client.ObjectKey{Name: first.TargetPV}, newPV))
	if newPV.Spec.ClaimRef == nil || newPV.Spec.ClaimRef.UID != claim.UID || newPV.Spec.PersistentVolumeReclaimPolicy != corev1.PersistentVolumeReclaimDelete {
		t.Errorf("the volume the claim went back to: claimRef %+v, policy %s; want the claim's UID %s and Delete", newPV.Spec.ClaimRef, newPV.Spec.PersistentVolumeReclaimPolicy, claim.UID)
	}
	running.Signal("restored")
	waitGuest("restored-verified", 10*time.Minute)
	t.Logf("the move back stopped as it should: %s; whole test %s", st.Message, time.Since(begin).Round(time.Second))
}

// recordPhase is the phase of the move recorded on the source PersistentVolume pv ("" when it has none).
func recordPhase(ctx context.Context, c client.Client, pv string) moveapi.Phase {
	p := &corev1.PersistentVolume{}
	if pv == "" || c.Get(ctx, client.ObjectKey{Name: pv}, p) != nil {
		return ""
	}
	var rec move.Record
	if json.Unmarshal([]byte(p.Annotations[move.AnnotationRecord]), &rec) != nil {
		return ""
	}
	return rec.Phase
}

// mvProgress is the move's state as the claim and its LogicalVolumes show it, for the log; copied once the
// receiver's high-water mark is at the end, reported once both agents reported the move's SHA-256.
func mvProgress(ctx context.Context, c client.Client, st moveapi.Status) (line string, copied, reported bool) {
	parts := []string{fmt.Sprintf("phase %q, progress %q, message %q", st.Phase, st.Progress, st.Message)}
	if st.TargetPV == "" {
		return parts[0], false, false
	}
	reported = true
	for _, name := range []string{cmp.Or(st.SourcePV, "pvc-move-source"), st.TargetPV} { // an LVMS PV is named as its LogicalVolume
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
		if slices.Contains(pvc.Finalizers, "kubernetes.io/pvc-protection") { // no pod exists in this cluster
			pvc.Finalizers = slices.DeleteFunc(pvc.Finalizers, func(f string) bool { return f == "kubernetes.io/pvc-protection" })
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

// mvRelay makes the other node's published receiver address reachable from this one: the address goes on
// this guest's loopback, and every connection to it on the receiver's port is relayed to the host's forward
// into the other node.
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
// files on it, its pod writes the volume through the agent's CSI socket while the move runs, and the source
// LV must stay, unchanged, until the confirmation.
func mvSourceGuest(t *testing.T) {
	startMoveAgent(t)
	mvRelay(t)
	vm.WaitSignal(t, "source-created")
	sourceID := mvShared(t, mvSourceID)
	dev := "/dev/" + mvVG + "/" + sourceID
	mvWaitDevice(t, dev)
	mvRun(t, "mkfs.ext4", "-q", dev)
	dir := t.TempDir()
	mvRun(t, "mount", dev, dir)
	sums := map[string]string{}
	rng := rand.NewChaCha8([32]byte{7})
	total := 0
	for i := range 6 {
		b := make([]byte, (i+1)<<20) // 1 to 6 MiB, 21 MiB in all
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
	t.Logf("wrote %d files (%d MiB) on %s", len(sums), total>>20, dev)
	vm.Signal(t, "source-written")

	// The pod: running when the move is asked for, then stopped and restarted by its controller over and over.
	vm.WaitSignal(t, "pod-start")
	pod := newMovePod(t, sourceID, "pvc-move-source")
	pod.run(t, "pod-running", "pod-stop")
	var attempts []mvAttempt
	for !vm.Signalled("pod-end") {
		phase := mvShared(t, mvPhase)
		err := pod.publish()
		a := mvAttempt{Phase: phase}
		if err != nil {
			a.Err = err.Error()
			if phase == string(moveapi.PhaseAwaitingConfirmation) && !vm.Signalled("pod-refused-after-swap") {
				vm.Signal(t, "pod-refused-after-swap")
			}
		} else { // never expected: what it writes must survive all the same
			pod.write(t)
			pod.unpublish(t)
		}
		attempts = append(attempts, a)
		time.Sleep(time.Second)
	}
	pod.save(t)
	b, err := json.Marshal(attempts)
	must(t, err)
	must(t, os.WriteFile(filepath.Join(vm.SharedDir(), mvAttempts), b, 0o644))
	vm.Signal(t, "pod-ended")

	vm.WaitSignal(t, "awaiting-confirmation")
	disks, err := vm.Disks()
	if err != nil || len(disks) != 1 {
		t.Fatalf("disks %v: %v", disks, err)
	}
	out := mvRun(t, "lvs", "--devices", disks[0], "--noheadings", "-o", "lv_name,lv_size", mvVG)
	if !strings.Contains(out, filepath.Base(dev)) {
		t.Fatalf("before confirmation the source LV %s is gone from node A: lvs says %q", dev, out)
	}
	start := time.Now()
	sum := mvDeviceSHA256(t, dev)
	t.Logf("node A keeps the source LV: %s; its SHA-256 %s (read in %s)", strings.TrimSpace(out), sum, time.Since(start).Round(time.Second))
	must(t, os.WriteFile(filepath.Join(vm.SharedDir(), mvSourceSum), []byte(sum), 0o644))
	vm.Signal(t, "source-kept")
	vm.WaitSignal(t, "move-finished")
}

// mvTargetGuest is node B: its agent creates the target LV and receives into it; once the claim is
// swapped its pod publishes the new volume, finds every file and every write node A's pod had acknowledged,
// and writes. In the move back to A, the guest writes behind the fence after the copy, and once the claim
// went back to its own volume, the pod finds that write too.
func mvTargetGuest(t *testing.T) {
	startMoveAgent(t)
	mvRelay(t)
	vm.WaitSignal(t, "awaiting-confirmation")
	targetID := mvShared(t, mvTargetID)
	mvWaitDevice(t, "/dev/"+mvVG+"/"+targetID)
	var sums map[string]string
	must(t, json.Unmarshal([]byte(mvShared(t, mvManifest)), &sums))
	var ackedA map[string]string
	readShared(t, vm.SharedDir(), fmt.Sprintf(mvAcked, mvNodeA), &ackedA)
	pod := newMovePod(t, targetID, "pvc-moved")
	if err := pod.publish(); err != nil {
		t.Fatalf("node b's pod cannot use the moved volume: %v", err)
	}
	pod.check(t, sums, "file")
	pod.check(t, ackedA, "acknowledged write of node a's pod")
	t.Logf("all %d files and %d acknowledged writes of node a's pod are on node b's new volume", len(sums), len(ackedA))
	for range 5 {
		pod.write(t)
	}
	pod.unpublish(t)
	pod.save(t)
	vm.Signal(t, "target-verified")

	// The move back: after the copy, something writes the source behind the fence (the device mounted
	// directly, not through CSI).
	vm.WaitSignal(t, "write-behind")
	dev := "/dev/" + mvVG + "/" + targetID
	dir := t.TempDir()
	mvRun(t, "mount", dev, dir)
	behind := []byte("written after the copy, past the hold\n")
	must(t, os.WriteFile(filepath.Join(dir, "behind-the-fence"), behind, 0o644))
	mvRun(t, "sync")
	mvRun(t, "umount", dir)
	vm.Signal(t, "written-behind")

	vm.WaitSignal(t, "restored")
	// The agent lets the volume go once it sees the hold removed: a moment after the move ended.
	for deadline := time.Now().Add(2 * time.Minute); ; time.Sleep(2 * time.Second) {
		err := pod.publish()
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after the move back stopped, node b's pod cannot use its volume: %v", err)
		}
	}
	s := sha256.Sum256(behind)
	pod.check(t, map[string]string{"behind-the-fence": hex.EncodeToString(s[:])}, "write behind the fence")
	pod.check(t, sums, "file")
	pod.check(t, ackedA, "acknowledged write of node a's pod")
	pod.check(t, pod.acked, "acknowledged write of node b's pod")
	pod.unpublish(t)
	t.Logf("the claim's own volume on node b has the write behind the fence and everything before it")
	vm.Signal(t, "restored-verified")
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
