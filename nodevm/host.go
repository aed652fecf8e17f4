// This file is the host side: the node VMs' addresses, the options localvm boots them with, the egress
// proxy's way into them, and waiting for their Nodes to be Ready.

package nodevm

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"

	"github.com/lvms-dev/lvms/localcluster"
	"github.com/lvms-dev/lvms/localvm"
)

// NodeOptions is one node VM.
type NodeOptions struct {
	// Name is the Node's name (and the VM's).
	Name string
	// Disks are the VM's disks (vda, vdb, ... in order) for the product to find.
	Disks []localvm.Disk
	// MemoryMiB and CPUs size the VM (default 3072 and 2).
	MemoryMiB, CPUs int
}

// DefaultNode is node-a with two empty 2 GiB disks and an empty 1 GiB one.
func DefaultNode() NodeOptions {
	return NodeOptions{Name: "node-a", Disks: []localvm.Disk{{Size: 2 << 30}, {Size: 2 << 30}, {Size: 1 << 30}}}
}

// Nodes are node VMs: New gives each its network, VMs the options to boot them with, Attach the machines
// booted; then WaitReady, Run and Stop.
type Nodes struct {
	nodes    []*node
	machines *localvm.Machines

	mu  sync.Mutex
	seq map[string]int // Run's last request number per node

	seedKey string // containerd's seed for the nodes' images (seed.go)
}

type node struct {
	opts    NodeOptions
	net     *localvm.Network
	podCIDR netip.Prefix
	tunnel  string       // host address of the guest's tunnel
	linkIP  netip.Prefix // the node's address on the link between two nodes (invalid: no link)
}

// New gives each node its network (10.200.<i>.0/24), pod subnet (10.244.<i>.0/24) and a free host port for
// its tunnel.
func New(opts []NodeOptions) (*Nodes, error) {
	if len(opts) == 0 || len(opts) > 200 {
		return nil, fmt.Errorf("nodevm: %d nodes, want 1 to 200", len(opts))
	}
	ns := &Nodes{seq: map[string]int{}}
	seen := map[string]bool{}
	for i, o := range opts {
		if o.Name == "" || seen[o.Name] {
			return nil, fmt.Errorf("nodevm: every node needs a name of its own (got %q)", o.Name)
		}
		seen[o.Name] = true
		if o.MemoryMiB == 0 {
			o.MemoryMiB = 3072
		}
		if o.CPUs == 0 {
			o.CPUs = 2
		}
		tunnel, err := localvm.FreeLoopbackAddr()
		if err != nil {
			return nil, err
		}
		ns.nodes = append(ns.nodes, &node{
			opts:    o,
			net:     &localvm.Network{Subnet: netip.MustParsePrefix(fmt.Sprintf("10.200.%d.0/24", i+1))},
			podCIDR: netip.MustParsePrefix(fmt.Sprintf("10.244.%d.0/24", i+1)),
			tunnel:  tunnel,
		})
	}
	if len(ns.nodes) == 2 {
		// Pods on one node reach pods on the other (a move's copy, agent to agent) over a cable between
		// the two VMs, routed by the nodes.
		var ports [2]int
		for i := range ports {
			p, err := localvm.FreeUDPPort()
			if err != nil {
				return nil, err
			}
			ports[i] = p
		}
		for i, n := range ns.nodes {
			n.net.Link = &localvm.Link{LocalPort: ports[i], RemotePort: ports[1-i], MAC: fmt.Sprintf("52:54:00:12:35:%02x", i+1)}
			n.linkIP = netip.MustParsePrefix(fmt.Sprintf("10.201.0.%d/24", i+1))
		}
	}
	return ns, nil
}

// routes are what node n routes over the link: every other node's pod subnet, via that node.
func (ns *Nodes) routes(n *node) string {
	var out []string
	for _, o := range ns.nodes {
		if o != n && o.linkIP.IsValid() && n.linkIP.IsValid() {
			out = append(out, o.podCIDR.String()+"="+o.linkIP.Addr().String())
		}
	}
	return strings.Join(out, ",")
}

// Names are the nodes' names, in New's order.
func (ns *Nodes) Names() []string {
	var out []string
	for _, n := range ns.nodes {
		out = append(out, n.opts.Name)
	}
	return out
}

// SANs are the addresses the guests reach the API server at: its serving certificate must name them.
func (ns *Nodes) SANs() []string {
	var out []string
	for _, n := range ns.nodes {
		out = append(out, n.net.HostSide().String())
	}
	return out
}

// apiGuestPort is where guests reach the API server (at their network's HostSide address).
const apiGuestPort = 6443

// GuestPath is where the guest sees a host path (its own /tmp is a fresh tmpfs).
func GuestPath(p string) string { return localvm.HostRootInGuest + p }

// VMs are the options to boot the nodes with (localvm.Boot, or e2e/vm's StartMany); every guest runs Serve.
// VMs writes what the guests read from the host into configDir: each kubelet's kubeconfig and the CA.
// binDir holds kubelet, containerd and ctr; images are the archives WriteImages wrote; each VM powers off
// after timeout.
func (ns *Nodes) VMs(cluster *localcluster.Cluster, configDir, binDir string, images []string, timeout time.Duration) ([]localvm.Options, error) {
	if err := os.MkdirAll(configDir, 0o755); err != nil {
		return nil, err
	}
	if err := os.WriteFile(filepath.Join(configDir, "ca.crt"), cluster.CA, 0o644); err != nil {
		return nil, err
	}
	var guestImages []string
	for _, p := range images {
		guestImages = append(guestImages, GuestPath(p))
	}
	key, err := seedKey(binDir, images)
	if err != nil {
		return nil, fmt.Errorf("containerd's seed for the node images: %w", err)
	}
	ns.seedKey = key
	var out []localvm.Options
	for i, n := range ns.nodes {
		api := fmt.Sprintf("%s:%d", n.net.HostSide(), apiGuestPort)
		kc, err := cluster.KubeconfigFor("https://"+api, "system:node:"+n.opts.Name, "system:nodes")
		if err != nil {
			return nil, err
		}
		if err := os.Rename(kc, filepath.Join(configDir, "kubelet-"+n.opts.Name+".kubeconfig")); err != nil {
			return nil, err
		}
		n.net.ToHost = []localvm.Forward{{GuestPort: apiGuestPort, HostAddr: strings.TrimPrefix(cluster.Server(), "https://")}}
		n.net.FromHost = []localvm.Forward{{GuestPort: tunnelPort, HostAddr: n.tunnel}}
		out = append(out, localvm.Options{
			Name: n.opts.Name, Disks: n.opts.Disks, MemoryMiB: n.opts.MemoryMiB, CPUs: n.opts.CPUs,
			Network: n.net, Timeout: timeout,
			Env: map[string]string{
				envNodeName: n.opts.Name, envNodeIP: n.net.Guest().String(), envAPI: api,
				envPodCIDR: n.podCIDR.String(), envBinDir: binDir, envConfig: GuestPath(configDir),
				envImages: strings.Join(guestImages, ","),
			},
		})
		maps.Copy(out[len(out)-1].Env, seedEnv(key, i == 0))
		if n.linkIP.IsValid() {
			out[len(out)-1].Env[envLinkIP] = n.linkIP.String()
			out[len(out)-1].Env[envLinkRoutes] = ns.routes(n)
		}
	}
	return out, nil
}

// Attach gives the nodes the machines booted from VMs' options.
func (ns *Nodes) Attach(m *localvm.Machines) { ns.machines = m }

// Dial is the egress proxy's way into the guests (localcluster.NewEgressProxy): node and pod addresses go
// through the tunnel of the VM they belong to.
func (ns *Nodes) Dial(ctx context.Context, addr string) (net.Conn, error) {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, err
	}
	ip, err := netip.ParseAddr(host)
	if err != nil {
		return nil, fmt.Errorf("not an address in a node VM: %s", addr)
	}
	for _, n := range ns.nodes {
		if ip == n.net.Guest() || n.podCIDR.Contains(ip) {
			return dialTunnel(ctx, n.tunnel, addr)
		}
	}
	return nil, fmt.Errorf("%s is in no node VM", addr)
}

// WaitReady waits until every node has started its kubelet and its Node reports Ready; it fails early when
// a VM exits first.
func (ns *Nodes) WaitReady(ctx context.Context, c kubernetes.Interface) error {
	if ns.machines == nil {
		return errors.New("nodevm: WaitReady before Attach")
	}
	for _, n := range ns.nodes {
		name := n.opts.Name
		if err := ns.machines.WaitSignal(ctx, upSignal(name)); err != nil {
			return fmt.Errorf("node %s did not start its kubelet: %w", name, err)
		}
		if err := publishSeed(ns.machines.SharedDir(), ns.seedKey); err != nil {
			return err
		}
		var last string
		err := wait.PollUntilContextCancel(ctx, 2*time.Second, true, func(ctx context.Context) (bool, error) {
			node, err := c.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				last = err.Error()
				return false, nil
			}
			for _, cond := range node.Status.Conditions {
				if cond.Type == corev1.NodeReady {
					last = fmt.Sprintf("Ready=%s %s: %s", cond.Status, cond.Reason, cond.Message)
					return cond.Status == corev1.ConditionTrue, nil
				}
			}
			return false, nil
		})
		if err != nil {
			return fmt.Errorf("node %s is not Ready: %w (last: %s)", name, err, last)
		}
	}
	return nil
}

// Stop tells the nodes to shut down (kubelet, then containerd); their VMs power off once they have.
func (ns *Nodes) Stop() error {
	if ns.machines == nil {
		return nil
	}
	return ns.machines.Signal(stopSignal)
}

// LogTails are the last lines of each node's kubelet and containerd logs, for a report of what failed.
func (ns *Nodes) LogTails(lines int) string {
	if ns.machines == nil {
		return ""
	}
	var b strings.Builder
	for _, n := range ns.nodes {
		dir := LogDir(ns.machines.SharedDir(), n.opts.Name)
		logs, _ := filepath.Glob(filepath.Join(dir, "kubelet*.log")) // kubelet-N.log after a restart
		for _, p := range append(logs, filepath.Join(dir, "containerd.log")) {
			data, err := os.ReadFile(p)
			if err != nil {
				continue
			}
			l := strings.Split(strings.TrimRight(string(data), "\n"), "\n")
			if len(l) > lines {
				l = l[len(l)-lines:]
			}
			fmt.Fprintf(&b, "--- %s %s (last %d lines)\n%s\n", n.opts.Name, filepath.Base(p), len(l), strings.Join(l, "\n"))
		}
	}
	return b.String()
}
