package localcluster

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/netip"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"time"

	"k8s.io/client-go/rest"

	"github.com/lvms-dev/lvms/reaper"
)

// startTimeout bounds Start when its context has no earlier deadline: on a busy two-core machine the API
// server alone takes half a minute.
const startTimeout = 3 * time.Minute

// Options configure Start.
type Options struct {
	// Dir holds the state: certificates, etcd's data, one <component>.log each, kubeconfigs. Required.
	Dir string
	// ExtraSANs are further IP addresses and DNS names for the API server's serving certificate, such as
	// the address guests dial. 127.0.0.1, localhost, the kubernetes Service's ClusterIP and its DNS names
	// are always on it.
	ExtraSANs []string
	// AdvertiseAddress is the API server address published in the kubernetes Endpoints, where kube-proxy
	// sends pods that dial the kubernetes Service. Default 127.0.0.1.
	AdvertiseAddress string
	// ServiceCIDR is the Service ClusterIP range. Default 10.0.0.0/24, whose first address 10.0.0.1 is the
	// kubernetes Service.
	ServiceCIDR string
	// EgressProxySocket, when set, sends the API server's traffic to nodes, pods and services (logs, exec,
	// port-forward, the proxy subresources) through the HTTP CONNECT proxy listening on this unix socket:
	// an EgressProxy the caller runs.
	EgressProxySocket string
	// SnapshotController also runs the Kubernetes snapshot controller (external-snapshotter's common
	// controller), which a distribution with snapshot support runs: it makes VolumeSnapshotContents of
	// VolumeSnapshots for the CSI driver's snapshotter. Start installs the VolumeSnapshot CRDs for it.
	SnapshotController bool
	// Binaries locate the programs. Required.
	Binaries Binaries
	// Log receives one line per step of Start and Stop. Nil: discarded.
	Log io.Writer
}

// Cluster is a running control plane.
type Cluster struct {
	// Dir is Options.Dir.
	Dir string
	// Config is the admin client configuration (group system:masters).
	Config *rest.Config
	// AdminKubeconfig is the path of a kubeconfig with the admin credentials, for kubectl.
	AdminKubeconfig string
	// CA is the cluster CA certificate, PEM: it signed the serving and every client certificate.
	CA []byte
	// Binaries are the directories the programs came from; Binaries.Node also holds kubelet and kubectl.
	Binaries Binaries

	port  int
	pki   *pki
	procs []*Process // in start order
	log   io.Writer

	stopOnce sync.Once
	stopErr  error
}

// Server is the API server's URL on the host.
func (c *Cluster) Server() string { return "https://127.0.0.1:" + strconv.Itoa(c.port) }

// Port is the API server's port on 127.0.0.1.
func (c *Cluster) Port() int { return c.port }

// CAFile is the path of the cluster CA certificate.
func (c *Cluster) CAFile() string { return c.pki.path("ca.crt") }

// PIDs are the process IDs of the components, each also the ID of its process group.
func (c *Cluster) PIDs() []int {
	pids := make([]int, len(c.procs))
	for i, p := range c.procs {
		pids[i] = p.cmd.Process.Pid
	}
	return pids
}

func (c *Cluster) logf(format string, args ...any) {
	fmt.Fprintf(c.log, "cluster: "+format+"\n", args...)
}

// Start starts etcd, kube-apiserver, kube-controller-manager and kube-scheduler and returns once the API
// server is ready, the controller-manager has created the default ServiceAccount and the scheduler reports
// itself ready. On error everything already started is stopped again; the logs stay in opts.Dir.
func Start(ctx context.Context, opts Options) (*Cluster, error) {
	if opts.Dir == "" {
		return nil, errors.New("cluster: Options.Dir is required")
	}
	// Every component started below carries the test binary's mark: should the binary die without Stop, its
	// watchdog (reaper) kills them, and whatever they started, and says so.
	if err := reaper.Start(); err != nil {
		return nil, err
	}
	if opts.AdvertiseAddress == "" {
		opts.AdvertiseAddress = "127.0.0.1"
	}
	if opts.ServiceCIDR == "" {
		opts.ServiceCIDR = "10.0.0.0/24"
	}
	if opts.Log == nil {
		opts.Log = io.Discard
	}
	if opts.Binaries == (Binaries{}) {
		return nil, errors.New("localcluster: Options.Binaries is required (tests: e2e/clustertest.FindBinaries)")
	}
	ctx, cancel := context.WithTimeout(ctx, startTimeout)
	defer cancel()

	serviceIP, err := firstIP(opts.ServiceCIDR)
	if err != nil {
		return nil, err
	}
	hosts := append([]string{"127.0.0.1", "localhost", serviceIP,
		"kubernetes", "kubernetes.default", "kubernetes.default.svc", "kubernetes.default.svc.cluster.local"},
		opts.ExtraSANs...)
	p, err := newPKI(filepath.Join(opts.Dir, "pki"), hosts)
	if err != nil {
		return nil, fmt.Errorf("cluster PKI: %w", err)
	}
	ports, err := FreePorts(5)
	if err != nil {
		return nil, err
	}
	c := &Cluster{Dir: opts.Dir, CA: p.ca.certPEM, Binaries: opts.Binaries, port: ports[2], pki: p, log: opts.Log}
	if c.Config, err = restConfig(p, c.Server(), "admin"); err != nil {
		return nil, err
	}
	if c.AdminKubeconfig, err = componentKubeconfig(opts.Dir, p, c.Server(), "admin"); err != nil {
		return nil, err
	}
	l := layout{dir: opts.Dir, pki: p, opts: opts, etcdClient: ports[0], etcdPeer: ports[1],
		apiserver: ports[2], controllerManager: ports[3], scheduler: ports[4]}
	if err := c.start(ctx, l); err != nil {
		if stopErr := c.Stop(); stopErr != nil {
			err = errors.Join(err, stopErr)
		}
		return nil, err
	}
	return c, nil
}

// start runs the components in order, each once the one it needs is ready.
func (c *Cluster) start(ctx context.Context, l layout) error {
	if err := c.run(l.etcdCommand()); err != nil {
		return err
	}
	if err := c.waitFor(ctx, "etcd health", l.etcdHealthy); err != nil {
		return err
	}
	apiserver, err := l.apiserverCommand()
	if err != nil {
		return err
	}
	if err := c.run(apiserver); err != nil {
		return err
	}
	if err := c.waitFor(ctx, "kube-apiserver /readyz", c.apiserverReady); err != nil {
		return err
	}
	for _, build := range []func() (command, error){l.controllerManagerCommand, l.schedulerCommand} {
		cmd, err := build()
		if err != nil {
			return err
		}
		if err := c.run(cmd); err != nil {
			return err
		}
	}
	if l.opts.SnapshotController {
		// It refuses to start without its CRDs.
		if err := InstallSnapshotCRDs(c.Config); err != nil {
			return err
		}
		cmd, err := l.snapshotControllerCommand()
		if err != nil {
			return err
		}
		if err := c.run(cmd); err != nil {
			return err
		}
	}
	if err := c.waitFor(ctx, "kube-scheduler /readyz", l.schedulerReady); err != nil {
		return err
	}
	if err := c.waitFor(ctx, "kube-controller-manager /healthz", l.controllerManagerHealthy); err != nil {
		return err
	}
	if err := c.waitFor(ctx, "the default ServiceAccount (made by kube-controller-manager)", c.defaultServiceAccount); err != nil {
		return err
	}
	c.logf("ready: %s (state and logs in %s)", c.Server(), c.Dir)
	return nil
}

func (c *Cluster) run(cmd command) error {
	bin, err := c.Binaries.path(cmd.name)
	if err != nil {
		return err
	}
	p, err := StartProcess(c.Dir, cmd.name, bin, cmd.args)
	if err != nil {
		return err
	}
	c.procs = append(c.procs, p)
	c.logf("started %s (pid %d), log %s", cmd.name, p.cmd.Process.Pid, p.log)
	return nil
}

// Stop ends every component, the last started first, and waits until each is gone. Calling it again returns
// the first call's result.
func (c *Cluster) Stop() error {
	c.stopOnce.Do(func() {
		var errs []error
		for _, p := range slices.Backward(c.procs) {
			if err := p.Stop(); err != nil {
				errs = append(errs, err)
			}
		}
		c.stopErr = errors.Join(errs...)
		c.logf("stopped")
	})
	return c.stopErr
}

// firstIP is the first host address of cidr: the kubernetes Service's ClusterIP.
func firstIP(cidr string) (string, error) {
	prefix, err := netip.ParsePrefix(cidr)
	if err != nil {
		return "", fmt.Errorf("service CIDR: %w", err)
	}
	ip := prefix.Masked().Addr().Next()
	if !prefix.Contains(ip) {
		return "", fmt.Errorf("service CIDR %s has no host address", cidr)
	}
	return ip.String(), nil
}
