package sharedvm

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"sigs.k8s.io/controller-runtime/pkg/client"

	lvmv2 "github.com/lvms-dev/lvms/api/lvm/v2alpha1"
	"github.com/lvms-dev/lvms/e2e/testenv"
	"github.com/lvms-dev/lvms/e2e/vm"
	"github.com/lvms-dev/lvms/nodeagent/shared/hostid"
	"github.com/lvms-dev/lvms/operator"
	"github.com/lvms-dev/lvms/operator/optest"
)

const (
	envBinary = "LVMS_SHARED_BINARY"
	lunSerial = "sharedlun"
	sanVG     = "san-vg"
)

// buildBinary builds the product's lvms binary where the guests see it: under the repository (the guests
// mount the host's root read-only; /tmp is theirs). Once per test binary: the package's tests run in parallel.
func buildBinary(t *testing.T) string {
	t.Helper()
	vm.Require(t)
	out, err := buildOnce()
	if err != nil {
		t.Fatal(err)
	}
	return out
}

var buildOnce = sync.OnceValues(func() (string, error) {
	out := filepath.Join(testenv.RepoRoot(), "bin", "e2e-sharedvm", "lvms")
	cmd := exec.Command("go", "build", "-o", out, "./cmd/lvms")
	cmd.Dir = testenv.RepoRoot()
	if b, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("build lvms: %v: %s", err, b)
	}
	return out, nil
})

// sharedSet is an LVMNodeSet with one Shared volume group on the LUN every node sees, by its stable path.
func sharedSet(ns, label string) *lvmv2.LVMNodeSet {
	return &lvmv2.LVMNodeSet{ObjectMeta: metav1.ObjectMeta{Name: "san", Namespace: ns},
		Spec: lvmv2.LVMNodeSetSpec{
			NodeSelector: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchExpressions: []corev1.NodeSelectorRequirement{
				{Key: label, Operator: corev1.NodeSelectorOpIn, Values: []string{"fabric-a"}}}}}},
			Template: lvmv2.LVMNodeSpec{
				VolumeGroups: []lvmv2.VolumeGroup{{Name: sanVG, AccessPolicy: lvmv2.AccessPolicyShared,
					DeviceSelector: lvmv2.DeviceSelector{DeviceSelectorTerms: []lvmv2.DeviceSelectorTerm{{MatchExpressions: []lvmv2.DeviceSelectorRequirement{
						{Key: lvmv2.KeyPath, Operator: lvmv2.OpIn, Values: []string{"/dev/disk/by-id/virtio-" + lunSerial}}}}}}}},
				DeviceClasses: []lvmv2.DeviceClass{{Name: "vm-disks", Strategy: lvmv2.StrategyThick, VolumeGroup: sanVG}},
			},
		}}
}

// TestVMSharedAgents: the product's node agent (the lvms binary) on two VMs sharing a LUN, with the
// operator on the host, sets up the shared volume group of an LVMNodeSet: each node claims its own host ID,
// runs the lock managers, one node creates the volume group, and both report it Healthy in their LVMNode.
// Then the shared driver serves volumes (driveSharedVolumes, guestSharedVolumes): the operator's shared
// provisioner provisions claims without node topology, a node agent in the lockspace creates the LVs; a
// ReadWriteOnce block volume staged on A is refused on B, and after A unstages it B reads A's data; a
// ReadWriteMany block volume is staged on both, A's O_DIRECT write read on B; each LVMNode shows where each
// volume is active; a volume grows offline; a volume active anywhere is not deleted (an event on the PV
// names where it is active) and is once both unstaged it; a ReadWriteMany file system claim gets an event
// saying it needs a block volume.
// Deleting the set takes the nodes out of the lockspace and keeps the volume group on the LUN.
func TestVMSharedAgents(t *testing.T) {
	if vm.InGuest() {
		agentGuest(t, func(t *testing.T) {
			guestSharedVolumes(t)
			vm.WaitSignal(t, "agents-done")
			checkVGKept(t)
		})
		return
	}
	t.Parallel()
	s := startSharedNodes(t)
	env, ns, nodes, running := s.env, s.ns, s.nodes, s.running
	defer running.Wait()
	defer running.Signal("agents-done")
	ctx := context.Background()
	vgOf := func(n string) *lvmv2.VolumeGroupStatus { return s.vgStatus(n) }

	ids, creator := leaseFacts(t, env, ns, sanVG)
	if len(ids) != 2 || ids[nodes[0]] == ids[nodes[1]] {
		t.Errorf("host IDs by node: %v, want two distinct", ids)
	}
	if !slices.Contains(nodes, creator) {
		t.Errorf("the volume group was created by %q, want one of %v", creator, nodes)
	}
	// What an admin reads in each LVMNode's status: the lock managers, the host ID, the lockspace, the creator.
	for _, n := range nodes {
		var node lvmv2.LVMNode
		if err := env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: n}, &node); err != nil {
			t.Fatal(err)
		}
		sl := node.Status.SharedLocking
		if sl == nil || sl.Mode != "Agent" || hostid.Name(int(sl.HostID)) != ids[n] || sl.Watchdog || !strings.Contains(sl.Fencing, "no fencing") {
			t.Errorf("%s: sharedLocking %+v, want mode Agent, host ID of Lease %s, no watchdog and no fencing said", n, sl, ids[n])
		}
		if c := meta.FindStatusCondition(node.Status.Conditions, lvmv2.ConditionLVMDConfigured); c == nil || c.Status != metav1.ConditionTrue || !strings.Contains(c.Message, "shared driver") {
			t.Errorf("%s: %s is %+v; want True: the shared class is not lvmd's", n, lvmv2.ConditionLVMDConfigured, c)
		}
		vg := vgOf(n)
		if vg.Lockspace != lvmv2.LockspaceJoined || vg.InitializedBy != creator {
			t.Errorf("%s: volume group lockspace %q, initialized by %q; want Joined, %q", n, vg.Lockspace, vg.InitializedBy, creator)
		}
	}

	s.driveSharedVolumes(t)

	// Deleting the set takes both nodes out of the lockspace and leaves the volume group on the LUN (the
	// guests check it after their agents stopped).
	set := sharedSet(ns, s.label)
	if err := env.Client.Delete(ctx, set); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(5 * time.Minute); ; time.Sleep(5 * time.Second) {
		err := env.Client.Get(ctx, client.ObjectKeyFromObject(set), set)
		if apierrors.IsNotFound(err) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the LVMNodeSet was never removed: %+v", set.Status)
		}
	}
	t.Log("LVMNodeSet removed; the nodes left the lockspace")
}

// sharedNodes are two VMs sharing a LUN, each running the lvms binary's node agent, with the operator, its
// shared provisioner and an LVMNodeSet with a Shared volume group on the host; started once both nodes
// report the volume group Healthy.
type sharedNodes struct {
	env     *testenv.Env
	ns      string
	label   string
	nodes   []string
	running *vm.Running
}

// envAgentArgs carries extra node agent flags to the guests.
const envAgentArgs = "LVMS_SHARED_AGENT_ARGS"

func startSharedNodes(t *testing.T, agentArgs ...string) *sharedNodes {
	t.Helper()
	s := &sharedNodes{nodes: []string{"node-a", "node-b"}, label: "test.lvms.io/san"}
	bin := buildBinary(t)
	var opts []vm.Options
	s.env, s.ns, opts = startCluster(t, s.nodes, filepath.Join(t.TempDir(), "lun.img"))
	for i := range opts {
		opts[i].Disks[0].Serial = lunSerial
		opts[i].Env[envBinary] = bin
		opts[i].Env[envAgentArgs] = strings.Join(agentArgs, " ")
	}
	ctx := context.Background()
	optest.Start(t, s.env.Config, operator.Options{Namespace: s.ns})
	startSharedProvisioner(t, s.env, s.ns)
	for _, n := range s.nodes {
		optest.Node(t, s.env.Client, n, map[string]string{s.label: "fabric-a"})
	}
	if err := s.env.Client.Create(ctx, sharedSet(s.ns, s.label)); err != nil {
		t.Fatal(err)
	}
	s.running = vm.StartMany(t, opts)
	deadline := time.Now().Add(8 * time.Minute) // bounds the wait; the agents take a few 30 s passes
	for {
		var states []string
		ready := true
		for _, n := range s.nodes {
			st := s.vgStatus(n)
			if st == nil {
				states, ready = append(states, n+": no status"), false
				continue
			}
			states = append(states, n+": "+string(st.State)+" "+st.Message)
			ready = ready && st.State == lvmv2.StateHealthy
		}
		if ready {
			t.Logf("shared volume group Healthy on every node: %v", states)
			return s
		}
		if time.Now().After(deadline) {
			s.running.Signal("agents-done")
			t.Fatalf("the shared volume group never became Healthy on both nodes: %v", states)
		}
		time.Sleep(5 * time.Second)
	}
}

// vgStatus is node n's status of the shared volume group (nil before it has one).
func (s *sharedNodes) vgStatus(n string) *lvmv2.VolumeGroupStatus {
	var node lvmv2.LVMNode
	if err := s.env.Client.Get(context.Background(), client.ObjectKey{Namespace: s.ns, Name: n}, &node); err != nil {
		return nil
	}
	for i := range node.Status.VolumeGroups {
		if node.Status.VolumeGroups[i].Name == sanVG {
			return &node.Status.VolumeGroups[i]
		}
	}
	return nil
}

// checkVGKept: the set was deleted before the host signalled, and the volume group must still be on the LUN.
func checkVGKept(t *testing.T) {
	disks, err := vm.Disks()
	if err != nil || len(disks) != 1 {
		t.Fatalf("disks %v: %v", disks, err)
	}
	// --devices: read the LUN itself, whatever the agent left in its devices file; the agent's lvmlockd still
	// runs (lvm2 skips a sanlock volume group without it).
	out, err := exec.Command("lvm", "vgs", "--devices", disks[0], "--config", "global{use_lvmlockd=1}", "--noheadings", "-o", "vg_name,vg_lock_type").CombinedOutput()
	if !strings.Contains(string(out), sanVG) {
		t.Fatalf("after the LVMNodeSet's deletion, %s is gone from the LUN: vgs says %q (%v)", sanVG, out, err)
	}
	t.Logf("%s: %s", vm.Role(), strings.TrimSpace(string(out)))
}

// agentGuest runs the lvms binary's node agent while then runs (the guest's part of the test).
func agentGuest(t *testing.T, then func(t *testing.T)) {
	startAgent(t)
	then(t)
}

// startAgent starts the lvms binary's node agent against the host's API server, with $LVMS_SHARED_AGENT_ARGS
// after the test's own flags (a later flag wins), and stops it when the test ends. It returns its PID.
func startAgent(t *testing.T) int {
	kubeconfig := filepath.Join(t.TempDir(), "kubeconfig")
	dec := func(k string) []byte {
		b, err := decodeEnv(k)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	cfg := clientcmdapi.Config{
		Clusters:       map[string]*clientcmdapi.Cluster{"host": {Server: os.Getenv(envAPI), CertificateAuthorityData: dec(envCA), TLSServerName: "localhost"}},
		AuthInfos:      map[string]*clientcmdapi.AuthInfo{"host": {ClientCertificateData: dec(envCert), ClientKeyData: dec(envKey)}},
		Contexts:       map[string]*clientcmdapi.Context{"host": {Cluster: "host", AuthInfo: "host"}},
		CurrentContext: "host",
	}
	if err := clientcmd.WriteToFile(cfg, kubeconfig); err != nil {
		t.Fatal(err)
	}
	lvmdDir := t.TempDir()
	cmd := exec.Command(os.Getenv(envBinary), "nodeagent", "--kubeconfig", kubeconfig, "--node-name", vm.Role(),
		"--namespace", os.Getenv(envNamespace), "--host-nsenter=false", "--lvm-devices-file=lvms.devices",
		"--lvmd-config", filepath.Join(lvmdDir, "lvmd.yaml"), "--health-probe-bind-address=0", "--diagnostics-bind-address=0",
		"--shared-csi-socket="+sharedSock, "--kubelet-registration-dir=")
	cmd.Args = append(cmd.Args, strings.Fields(os.Getenv(envAgentArgs))...)
	return startProcess(t, cmd)
}

// startProcess starts cmd in its own process group with the test's output, and stops the group when the
// test ends (TERM, then KILL after 30 s). It returns the PID.
func startProcess(t *testing.T, cmd *exec.Cmd) int {
	t.Helper()
	cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	t.Cleanup(func() {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(30 * time.Second):
			_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
			<-exited
		}
	})
	return cmd.Process.Pid
}
