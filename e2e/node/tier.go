package node

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"

	"github.com/lvms-dev/lvms/e2e/clustertest"
	"github.com/lvms-dev/lvms/e2e/testenv"
	"github.com/lvms-dev/lvms/e2e/vm"
	"github.com/lvms-dev/lvms/localcluster"
	"github.com/lvms-dev/lvms/testtier"
)

// Options shape a test bed.
type Options struct {
	// Nodes are the node VMs; default one node, DefaultNode.
	Nodes []NodeOptions
}

// NodeOptions is one node VM.
type NodeOptions struct {
	// Name is the Node's name (and the VM's).
	Name string
	// Disks are the VM's disks (vda, vdb, ... in order) for the product to find.
	Disks []vm.Disk
	// MemoryMiB and CPUs size the VM (default 3072 and 2).
	MemoryMiB, CPUs int
}

// DefaultNode is node-a with two empty 2 GiB disks and an empty 1 GiB one.
func DefaultNode() NodeOptions {
	return NodeOptions{Name: "node-a", Disks: []vm.Disk{{Size: 2 << 30}, {Size: 2 << 30}, {Size: 1 << 30}}}
}

// Tier is a running test bed: the control plane on the host and the node VMs.
type Tier struct {
	t       *testing.T
	Cluster *localcluster.Cluster
	Client  kubernetes.Interface
	nodes   []*nodeVM
	vms     *vm.Running
	dir     string

	guestMu  sync.Mutex
	guestSeq map[string]int // GuestRun's last request number per node
}

type nodeVM struct {
	opts    NodeOptions
	net     *vm.Network
	podCIDR netip.Prefix
	tunnel  string // host address of the guest's tunnel
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
		opts.Nodes = []NodeOptions{DefaultNode()}
	}
	bins, err := clustertest.FindBinaries()
	if err != nil {
		t.Fatalf("node tier binaries: %v", err) // FindBinaries builds what is missing: this is a real failure
	}
	tr := &Tier{t: t, dir: t.TempDir(), guestSeq: map[string]int{}}
	var sans []string
	for i, o := range opts.Nodes {
		if o.MemoryMiB == 0 {
			o.MemoryMiB = 3072
		}
		if o.CPUs == 0 {
			o.CPUs = 2
		}
		n := &nodeVM{
			opts:    o,
			net:     &vm.Network{Subnet: netip.MustParsePrefix(fmt.Sprintf("10.200.%d.0/24", i+1))},
			podCIDR: netip.MustParsePrefix(fmt.Sprintf("10.244.%d.0/24", i+1)),
			tunnel:  vm.FreeHostAddr(t),
		}
		sans = append(sans, n.net.HostSide().String())
		tr.nodes = append(tr.nodes, n)
	}

	images, err := writeImages(tr.dir)
	if errors.Is(err, errNoProductImage) {
		testtier.Unavailablef(t, "%v", err)
	}
	if err != nil {
		t.Fatal(err)
	}
	proxy, err := localcluster.NewEgressProxy(filepath.Join(tr.dir, "egress.sock"), tr.dialGuest)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { proxy.Close() })
	tr.Cluster = clustertest.StartT(t, localcluster.Options{
		Dir: filepath.Join(tr.dir, "cluster"), ExtraSANs: sans, EgressProxySocket: proxy.Socket(), Binaries: bins,
		SnapshotController: true,
	})
	if tr.Client, err = kubernetes.NewForConfig(tr.Cluster.Config); err != nil {
		t.Fatal(err)
	}

	// What the guests read from the host: kubeconfigs, the CA and the images (the guest sees the host's /
	// under /run/lvms-host, since its own /tmp is fresh).
	cfgDir := filepath.Join(tr.dir, "config")
	if err := os.MkdirAll(cfgDir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(cfgDir, "ca.crt"), tr.Cluster.CA, 0o644); err != nil {
		t.Fatal(err)
	}
	var guestImages []string
	for _, p := range images {
		guestImages = append(guestImages, hostPath(p))
	}
	var vmOpts []vm.Options
	for _, n := range tr.nodes {
		api := fmt.Sprintf("%s:%d", n.net.HostSide(), apiGuestPort)
		kc, err := tr.Cluster.KubeconfigFor("https://"+api, "system:node:"+n.opts.Name, "system:nodes")
		if err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(kc, filepath.Join(cfgDir, "kubelet-"+n.opts.Name+".kubeconfig")); err != nil {
			t.Fatal(err)
		}
		n.net.ToHost = []vm.Forward{{GuestPort: apiGuestPort, HostAddr: strings.TrimPrefix(tr.Cluster.Server(), "https://")}}
		n.net.FromHost = []vm.Forward{{GuestPort: tunnelPort, HostAddr: n.tunnel}}
		vmOpts = append(vmOpts, vm.Options{
			Name: n.opts.Name, Disks: n.opts.Disks, MemoryMiB: n.opts.MemoryMiB, CPUs: n.opts.CPUs,
			Network: n.net, Timeout: vmTimeout,
			Env: map[string]string{
				envNodeName: n.opts.Name, envNodeIP: n.net.Guest().String(), envAPI: api,
				envPodCIDR: n.podCIDR.String(), envBinDir: bins.Node, envConfig: hostPath(cfgDir),
				envImages: strings.Join(guestImages, ","),
			},
		})
	}
	tr.vms = vm.StartMany(t, vmOpts)
	t.Cleanup(tr.stop)
	for _, n := range tr.nodes {
		tr.waitNodeReady(n.opts.Name)
	}
	return tr
}

// apiGuestPort is where guests reach the API server (at their network's HostSide address).
const apiGuestPort = 6443

// hostPath is where the guest sees a host path under /tmp (the guest's own /tmp is a fresh tmpfs).
func hostPath(p string) string { return "/run/lvms-host" + p }

// Serve is a node VM's part of the test: see Start.
func Serve(t *testing.T) { serveNode(t) }

// dialGuest is the egress proxy's way into the guests: node and pod addresses go through the tunnel of
// the VM they belong to.
func (tr *Tier) dialGuest(ctx context.Context, addr string) (net.Conn, error) {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, err
	}
	ip, err := netip.ParseAddr(host)
	if err != nil {
		return nil, fmt.Errorf("not an address in a node VM: %s", addr)
	}
	for _, n := range tr.nodes {
		if ip == n.net.Guest() || n.podCIDR.Contains(ip) {
			return dialTunnel(ctx, n.tunnel, addr)
		}
	}
	return nil, fmt.Errorf("%s is in no node VM", addr)
}

// waitNodeReady waits until the Node reports Ready (or its VM dies).
func (tr *Tier) waitNodeReady(name string) {
	tr.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	if err := tr.vms.WaitSignal(ctx, "up-"+name); err != nil {
		tr.t.Fatalf("node %s did not start its kubelet: %v", name, err)
	}
	var last string
	err := wait.PollUntilContextCancel(ctx, 2*time.Second, true, func(ctx context.Context) (bool, error) {
		n, err := tr.Client.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			last = err.Error()
			return false, nil
		}
		for _, c := range n.Status.Conditions {
			if c.Type == corev1.NodeReady {
				last = fmt.Sprintf("Ready=%s %s: %s", c.Status, c.Reason, c.Message)
				return c.Status == corev1.ConditionTrue, nil
			}
		}
		return false, nil
	})
	if err != nil {
		tr.t.Fatalf("node %s is not Ready: %v (last: %s)", name, err, last)
	}
}

// stop tells the nodes to shut down, waits for the VMs and, when the test failed, shows the node logs.
func (tr *Tier) stop() {
	if tr.t.Failed() {
		tr.showNodeLogs()
	}
	tr.vms.Signal("stop")
	tr.vms.Wait()
}

// showNodeLogs prints the end of each node's kubelet and containerd logs.
func (tr *Tier) showNodeLogs() {
	for _, n := range tr.nodes {
		logs, _ := filepath.Glob(filepath.Join(tr.vms.SharedDir(), "node-"+n.opts.Name, "kubelet*.log")) // kubelet-N.log after a restart
		for _, p := range append(logs, filepath.Join(tr.vms.SharedDir(), "node-"+n.opts.Name, "containerd.log")) {
			f := filepath.Base(p)
			b, err := os.ReadFile(p)
			if err != nil {
				continue
			}
			lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
			if len(lines) > 60 {
				lines = lines[len(lines)-60:]
			}
			tr.t.Logf("--- %s %s (last %d lines)\n%s", n.opts.Name, f, len(lines), strings.Join(lines, "\n"))
		}
	}
}

// Kubectl runs the node tier's kubectl as the cluster admin from the repository root.
func (tr *Tier) Kubectl(args ...string) (string, error) { return tr.KubectlIn("", args...) }

// KubectlIn is Kubectl with stdin.
func (tr *Tier) KubectlIn(stdin string, args ...string) (string, error) {
	// Every kubectl call is bounded: a wait or rollout names its own shorter timeout.
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, filepath.Join(tr.Cluster.Binaries.Node, "kubectl"), append([]string{"--kubeconfig", tr.Cluster.AdminKubeconfig}, args...)...)
	cmd.Dir = testenv.RepoRoot()
	cmd.Stdin = strings.NewReader(stdin)
	out, err := cmd.CombinedOutput()
	return string(out), err
}
