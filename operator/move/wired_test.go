package move_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	certv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/utils/clock"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/config"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/yaml"

	moveapi "github.com/lvms-dev/lvms/api/move"
	topolvmv1 "github.com/lvms-dev/lvms/api/topolvm/v1"
	"github.com/lvms-dev/lvms/e2e/testenv"
	"github.com/lvms-dev/lvms/nodeagent/movefence"
	"github.com/lvms-dev/lvms/nodeagent/transfer"
	"github.com/lvms-dev/lvms/nodeagent/transfercert"
	"github.com/lvms-dev/lvms/operator/move"
	opnames "github.com/lvms-dev/lvms/operator/names"
	"github.com/lvms-dev/lvms/operator/transferca"
)

// wiredVG is the volume group of the test's device class: a node's devices are <dir>/<vg>/<volume ID>.
const wiredVG = "vg"

// TestMove_Wired runs a move the way a cluster does, with no step driven by the test: the operator's move
// controller and transfer signer and both node agents' transfer controllers run as controllers against
// the API server, each agent as the node agent's ServiceAccount bound to its node with the RBAC of
// deploy/nodeagent. The agents ask for their certificates, the signer issues them, the target agent
// receives over mutual TLS from the source agent, both report the SHA-256, and the claim is swapped; the
// source is released only after the confirmation. The test plays what is not in this control plane:
// kube-controller-manager (pvc-protection, binding) and the agents' LogicalVolume controller (a new
// LogicalVolume gets a volume ID and a device file the size of the source's). Devices are files: the VM
// lane copies real logical volumes (nodeagent/transfer TestVMMoveVolume).
func TestMove_Wired(t *testing.T) {
	testenv.Require(t)
	w := newWorld(t)
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	agentUser := "system:serviceaccount:" + w.ns + ":" + opnames.NodeAgent
	bindAgentRole(t, w.ns, agentUser)

	// The operator's side.
	approvals, err := kubernetes.NewForConfig(env.Config)
	must(t, err)
	op := newManager(t, env.Config)
	must(t, (&move.Reconciler{Client: op.GetClient(), Reader: op.GetAPIReader(), Names: names}).SetupWithManager(op))
	must(t, (&transferca.Signer{Client: op.GetClient(), Approvals: approvals, Namespace: w.ns, AgentUser: agentUser, Clock: clock.RealClock{}}).SetupWithManager(op))
	start(t, ctx, op)

	// The agents: node A holds the source volume.
	dirs := map[string]string{w.nodeA: t.TempDir(), w.nodeB: t.TempDir()}
	src := w.lv(w.sourceLV)
	data := make([]byte, 6<<20+12345)
	_, _ = rand.Read(data)
	srcPath := filepath.Join(dirs[w.nodeA], wiredVG, src.Status.VolumeID)
	must(t, os.MkdirAll(filepath.Dir(srcPath), 0o755))
	must(t, os.WriteFile(srcPath, data, 0o600))
	for _, node := range []string{w.nodeA, w.nodeB} {
		cfg := rest.CopyConfig(env.Config)
		cfg.Impersonate = rest.ImpersonationConfig{UserName: agentUser, Extra: map[string][]string{transferca.NodeNameExtra: {node}}}
		cs, err := kubernetes.NewForConfig(cfg)
		must(t, err)
		m := newManager(t, cfg)
		c := transfer.NewController(transfer.ControllerOptions{NodeName: node, Client: m.GetClient(), Reader: m.GetAPIReader(),
			Identity:    &transfercert.Requester{Client: cs, Node: node, Clock: clock.RealClock{}, Poll: 100 * time.Millisecond},
			VolumeGroup: func(string) (string, bool, error) { return wiredVG, false, nil }, DeviceDir: dirs[node],
			ListenHost: "127.0.0.1", ProgressDir: t.TempDir(), ChunkSize: 1 << 20,
			Backoff: wait.Backoff{Duration: 100 * time.Millisecond, Factor: 1, Steps: 1 << 30}})
		must(t, c.SetupWithManager(m))
		must(t, movefence.New(movefence.Options{NodeName: node, Client: m.GetClient(), Fence: fileFence{dir: filepath.Join(dirs[node], wiredVG)},
			Reporter: transfer.APIReporter{Client: m.GetClient(), NodeName: node}, Recheck: 100 * time.Millisecond}).SetupWithManager(m))
		start(t, ctx, m)
	}

	must(t, move.Request(ctx, env.Client, w.claim, w.nodeB))
	st := w.await(t, func() { w.kcm(); w.makeTargetDevice(dirs[w.nodeB], int64(len(data))) }, moveapi.PhaseAwaitingConfirmation)

	// What the user notices: the claim is bound to the new volume on node B, whose device holds the same
	// bytes; the digest both agents reported is the data's; the source is kept, Retain.
	sum := sha256.Sum256(data)
	if st.SHA256 != hex.EncodeToString(sum[:]) {
		t.Errorf("the move's SHA-256 is %q, want the source data's %x", st.SHA256, sum)
	}
	target := w.lv(st.TargetPV)
	got, err := os.ReadFile(filepath.Join(dirs[w.nodeB], wiredVG, target.Status.VolumeID))
	must(t, err)
	if !bytes.Equal(got, data) {
		t.Fatalf("the target device differs from the source (%d bytes, want %d)", len(got), len(data))
	}
	if pvc := w.pvc(); pvc.Spec.VolumeName != st.TargetPV || pvc.UID == w.sourceClaimUID {
		t.Fatalf("the claim is bound to %q (uid %s), want the new volume %s and a new claim", pvc.Spec.VolumeName, pvc.UID, st.TargetPV)
	}
	if pv := w.pv(w.sourcePV); pv.Spec.PersistentVolumeReclaimPolicy != corev1.PersistentVolumeReclaimRetain || w.lv(w.sourceLV) == nil {
		t.Fatalf("before confirmation the source PV has policy %s (want Retain) or its LogicalVolume is gone", pv.Spec.PersistentVolumeReclaimPolicy)
	}
	if b, err := os.ReadFile(srcPath); err != nil || !bytes.Equal(b, data) {
		t.Fatalf("the source device changed during the move (%v)", err)
	}
	// Each agent's certificate was issued by the operator's signer for the node its token is bound to.
	csrs := &certv1.CertificateSigningRequestList{}
	must(t, env.Client.List(ctx, csrs))
	issued := map[string]bool{}
	for _, csr := range csrs.Items {
		node := csr.Spec.Extra[transferca.NodeNameExtra]
		if csr.Spec.SignerName == transferca.SignerName && csr.Spec.Username == agentUser && len(node) == 1 && len(csr.Status.Certificate) > 0 {
			issued[node[0]] = true
		}
	}
	if !issued[w.nodeA] || !issued[w.nodeB] {
		t.Errorf("transfer certificates issued for %v, want both nodes %s and %s", issued, w.nodeA, w.nodeB)
	}

	// Confirmation releases the source: its original reclaim policy (Delete) is restored.
	must(t, move.Confirm(ctx, env.Client, w.claim, st.ID))
	w.await(t, w.kcm, moveapi.PhaseDone)
	if pv := w.pv(w.sourcePV); pv.Spec.PersistentVolumeReclaimPolicy != corev1.PersistentVolumeReclaimDelete {
		t.Fatalf("after confirmation the source PV has policy %s, want Delete", pv.Spec.PersistentVolumeReclaimPolicy)
	}
}

// fileFence is the CSI node service's hold over device files: nothing publishes them in this test.
type fileFence struct{ dir string }

func (fileFence) Hold(context.Context, string, string) ([]string, error) { return nil, nil }
func (fileFence) Release(string)                                         {}
func (f fileFence) Device(_ context.Context, volumeID string) (string, []string, error) {
	return filepath.Join(f.dir, volumeID), nil, nil
}

// await runs between until the claim's move shows phase want; the controllers do the rest.
func (w *world) await(t *testing.T, between func(), want moveapi.Phase) moveapi.Status {
	t.Helper()
	testenv.Require(t)
	var st moveapi.Status
	err := wait.PollUntilContextTimeout(t.Context(), 100*time.Millisecond, 2*time.Minute, true, func(context.Context) (bool, error) {
		between()
		w.checkInvariants()
		if pvc := w.pvc(); pvc != nil {
			st, _, _ = moveapi.ParseStatus(pvc)
		}
		return st.Phase == want, nil
	})
	if err != nil {
		t.Fatalf("the move did not reach %s: %+v", want, st)
	}
	return st
}

// makeTargetDevice plays the target node agent's LogicalVolume controller: a new LogicalVolume on node B
// gets a volume ID and a device file of size bytes.
func (w *world) makeTargetDevice(dir string, size int64) {
	w.t.Helper()
	list := &topolvmv1.LogicalVolumeList{}
	must(w.t, env.Client.List(ctx(w.t), list))
	for i := range list.Items {
		lv := &list.Items[i]
		if lv.Spec.NodeName != w.nodeB || lv.Status.VolumeID != "" || !lv.DeletionTimestamp.IsZero() {
			continue
		}
		path := filepath.Join(dir, wiredVG, string(lv.UID))
		must(w.t, os.MkdirAll(filepath.Dir(path), 0o755))
		f, err := os.Create(path)
		must(w.t, err)
		must(w.t, f.Truncate(size))
		must(w.t, f.Close())
		lv.Status.VolumeID = string(lv.UID)
		must(w.t, env.Client.Status().Update(ctx(w.t), lv))
	}
}

// bindAgentRole grants user the node agent's ClusterRole as deploy/nodeagent defines it.
func bindAgentRole(t *testing.T, ns, user string) {
	t.Helper()
	testenv.Require(t)
	raw, err := os.ReadFile(filepath.Join(testenv.RepoRoot(), "deploy", "nodeagent", "clusterrole.yaml"))
	must(t, err)
	role := &rbacv1.ClusterRole{}
	must(t, yaml.Unmarshal(raw, role))
	env.Grant(t, ns+"-node-agent", rbacv1.Subject{Kind: rbacv1.ServiceAccountKind, Namespace: ns, Name: strings.TrimPrefix(user, "system:serviceaccount:"+ns+":")}, role.Rules...)
}

func newManager(t *testing.T, cfg *rest.Config) ctrl.Manager {
	t.Helper()
	testenv.Require(t)
	m, err := ctrl.NewManager(cfg, ctrl.Options{Scheme: env.Scheme, Metrics: metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0", Controller: config.Controller{SkipNameValidation: ptr.To(true)}})
	must(t, err)
	return m
}

// start runs m until the test ends.
func start(t *testing.T, ctx context.Context, m ctrl.Manager) {
	t.Helper()
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- m.Start(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("manager: %v", err)
		}
	})
}
