package node

import (
	"context"
	"errors"
	"path/filepath"
	"testing"
	"time"

	"k8s.io/client-go/kubernetes"

	"github.com/lvms-dev/lvms/e2e/clustertest"
	"github.com/lvms-dev/lvms/e2e/testenv"
	"github.com/lvms-dev/lvms/e2e/vm"
	"github.com/lvms-dev/lvms/localcluster"
	"github.com/lvms-dev/lvms/nodevm"
	"github.com/lvms-dev/lvms/testtier"
)

// Options shape a test bed.
type Options struct {
	// Nodes are the node VMs; default one node, nodevm.DefaultNode.
	Nodes []nodevm.NodeOptions
}

// Tier is a running test bed: the control plane on the host and the node VMs.
type Tier struct {
	t       *testing.T
	Cluster *localcluster.Cluster
	Client  kubernetes.Interface
	nodes   *nodevm.Nodes
	vms     *vm.Running
	dir     string
}

// vmTimeout bounds the node VMs: the whole tier's flows run while they are up.
const vmTimeout = 75 * time.Minute

// Start brings up the test bed for the calling test, which must begin with
//
//	if vm.InGuest() { node.Serve(t); return }
//
// (the node VMs run the test binary, as every VM of the lane does). It returns once every Node is Ready;
// at cleanup the nodes stop cleanly and the control plane goes. Under -short (make check) it skips the test
// before it builds or starts anything.
func Start(t *testing.T, opts Options) *Tier {
	t.Helper()
	testtier.Needs(t, "the real-node tier (a control plane, kubelet and containerd in VMs of the VM lane)")
	if len(opts.Nodes) == 0 {
		opts.Nodes = []nodevm.NodeOptions{nodevm.DefaultNode()}
	}
	bins, err := clustertest.FindBinaries()
	if err != nil {
		t.Fatalf("node tier binaries: %v", err) // FindBinaries builds what is missing: this is a real failure
	}
	tr := &Tier{t: t, dir: t.TempDir()}
	if tr.nodes, err = nodevm.New(opts.Nodes); err != nil {
		t.Fatal(err)
	}
	images, err := nodevm.WriteImages(tr.dir, testenv.RepoRoot())
	if errors.Is(err, nodevm.ErrNoProductImage) {
		testtier.Unavailablef(t, "%v", err)
	}
	if err != nil {
		t.Fatal(err)
	}
	proxy, err := localcluster.NewEgressProxy(filepath.Join(tr.dir, "egress.sock"), tr.nodes.Dial)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { proxy.Close() })
	tr.Cluster = clustertest.StartT(t, localcluster.Options{
		Dir: filepath.Join(tr.dir, "cluster"), ExtraSANs: tr.nodes.SANs(), EgressProxySocket: proxy.Socket(), Binaries: bins,
		SnapshotController: true,
	})
	if tr.Client, err = kubernetes.NewForConfig(tr.Cluster.Config); err != nil {
		t.Fatal(err)
	}
	vmOpts, err := tr.nodes.VMs(tr.Cluster, filepath.Join(tr.dir, "config"), bins.Node, images, vmTimeout)
	if err != nil {
		t.Fatal(err)
	}
	tr.vms = vm.StartMany(t, vmOpts)
	tr.nodes.Attach(tr.vms.Machines())
	t.Cleanup(tr.stop)
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	if err := tr.nodes.WaitReady(ctx, tr.Client); err != nil {
		t.Fatal(err)
	}
	return tr
}

// Serve is a node VM's part of the test: see Start.
func Serve(t *testing.T) {
	ctx := context.Background()
	if d, ok := t.Deadline(); ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithDeadline(ctx, d.Add(-10*time.Second))
		defer cancel()
	}
	if err := nodevm.Serve(ctx, t.Logf); err != nil {
		t.Fatal(err)
	}
}

// GuestRun runs argv on the named node (a built-in when it starts with "@", nodevm.RestartKubelet and
// nodevm.KillProcesses) and returns its output; the error says how it failed. The command is killed after
// timeout.
func (tr *Tier) GuestRun(node string, timeout time.Duration, argv ...string) (string, error) {
	return tr.nodes.Run(node, timeout, argv...)
}

// GuestRunOK is GuestRun that fails the test on an error.
func (tr *Tier) GuestRunOK(t *testing.T, node string, argv ...string) string {
	t.Helper()
	out, err := tr.GuestRun(node, 2*time.Minute, argv...)
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	return out
}

// stop tells the nodes to shut down, waits for the VMs and, when the test failed, shows the node logs.
func (tr *Tier) stop() {
	if tr.t.Failed() {
		tr.t.Log(tr.nodes.LogTails(60))
	}
	if err := tr.nodes.Stop(); err != nil {
		tr.t.Error(err)
	}
	tr.vms.Wait()
}

// Kubectl runs the node tier's kubectl as the cluster admin from the repository root.
func (tr *Tier) Kubectl(args ...string) (string, error) { return tr.KubectlIn("", args...) }

// KubectlIn is Kubectl with stdin.
func (tr *Tier) KubectlIn(stdin string, args ...string) (string, error) {
	return tr.kubectl().Run(context.Background(), stdin, args...)
}
