// This file is the sandbox with real nodes (ModeReal): the control plane on the host, two node VMs
// (nodevm on localvm) running kubelet and containerd, and LVMS installed from deploy/ as the README's
// Install section says, with the image `make image` builds.

package sandbox

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"k8s.io/client-go/kubernetes"

	"github.com/lvms-dev/lvms/localcluster"
	"github.com/lvms-dev/lvms/localvm"
	"github.com/lvms-dev/lvms/nodevm"
)

// RealNamespace is where the kubernetes overlay installs LVMS (the real-node sandbox's namespace).
const RealNamespace = "lvms-system"

// RealTopology is the real-node sandbox's nodes: two VMs with three empty disks each (vda and vdb hold the
// demo's volume groups, vdc is left free).
func RealTopology() []nodevm.NodeOptions {
	disks := func() []localvm.Disk { return []localvm.Disk{{Size: 4 * gib}, {Size: 4 * gib}, {Size: 2 * gib}} }
	return []nodevm.NodeOptions{
		{Name: "lvms-node-1", Disks: disks(), MemoryMiB: 3072, CPUs: 2},
		{Name: "lvms-node-2", Disks: disks(), MemoryMiB: 3072, CPUs: 2},
	}
}

// nodeVMTimeout bounds the node VMs: the sandbox runs until Ctrl-C, a week at most.
const nodeVMTimeout = 7 * 24 * time.Hour

// ServeNodeArgs are the arguments the node VMs run the lvms binary with (lvms local serve-node).
var ServeNodeArgs = []string{"local", "serve-node"}

// startReal brings up the real-node sandbox: what it needs checked first (qemu, memory, the image), then
// the control plane, the node VMs, LVMS and the demo.
func (s *sandbox) startReal(ctx context.Context) error {
	if reason := localvm.Unavailable(); reason != "" {
		return fmt.Errorf("real nodes need qemu: %s; install it (apt-get install qemu-system-x86, or make run) or run the simulated sandbox: lvms local --simulated", reason)
	}
	topo := RealTopology()
	if err := enoughMemory("/proc/meminfo", topo); err != nil {
		return err
	}
	bins, err := FindBinaries(ctx, s.opts.RepoRoot, true)
	if err != nil {
		return err
	}
	images, err := nodevm.WriteImages(filepath.Join(s.opts.StateDir, "images"), s.opts.RepoRoot)
	if errors.Is(err, nodevm.ErrNoProductImage) {
		return fmt.Errorf("%w; or run the simulated sandbox: lvms local --simulated", err)
	}
	if err != nil {
		return fmt.Errorf("write the nodes' images: %w", err)
	}
	s.cleanup = append(s.cleanup, func(context.Context) error { return os.RemoveAll(filepath.Join(s.opts.StateDir, "images")) })
	nodes, err := nodevm.New(topo)
	if err != nil {
		return err
	}
	proxy, err := localcluster.NewEgressProxy(filepath.Join(s.opts.StateDir, "egress.sock"), nodes.Dial)
	if err != nil {
		return err
	}
	s.cleanup = append(s.cleanup, func(context.Context) error { return proxy.Close() })
	cl, err := s.startControlPlane(ctx, localcluster.Options{Binaries: bins, ExtraSANs: nodes.SANs(), EgressProxySocket: proxy.Socket()})
	if err != nil {
		return err
	}
	if err := s.bootNodes(ctx, cl, bins, nodes, images); err != nil {
		return err
	}
	if err := s.install(ctx); err != nil {
		return err
	}
	if err := s.startConsole(ctx); err != nil {
		return err
	}
	if err := s.applyDemo(ctx); err != nil {
		return err
	}
	s.printRealNextSteps()
	return nil
}

// enoughMemory refuses to boot VMs the machine cannot hold: their memory and a GiB for the control plane
// must be available (MemAvailable in meminfo).
func enoughMemory(meminfo string, topo []nodevm.NodeOptions) error {
	need := 1024
	for _, n := range topo {
		need += n.MemoryMiB
	}
	f, err := os.Open(meminfo)
	if err != nil {
		return fmt.Errorf("read the free memory: %w", err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) >= 2 && fields[0] == "MemAvailable:" {
			kib, err := strconv.Atoi(fields[1])
			if err != nil {
				return fmt.Errorf("%s: MemAvailable %q is not a number", meminfo, fields[1])
			}
			if have := kib / 1024; have < need {
				return fmt.Errorf("real nodes need %d MiB of memory available (%d node VMs and the control plane), this machine has %d MiB: free some, or run the simulated sandbox: lvms local --simulated", need, len(topo), have)
			}
			return nil
		}
	}
	return fmt.Errorf("%s has no MemAvailable line", meminfo)
}

// nodesUpTimeouts bound each boot of the node VMs until every Node is Ready (about a minute here). Now and
// then a guest kernel hangs early in its boot under software emulation (RCU stalls on its second vCPU, on
// the console); the sandbox then boots the VMs once more, with more time, rather than fail.
var nodesUpTimeouts = []time.Duration{6 * time.Minute, 20 * time.Minute}

// bootNodes boots the node VMs, each running `lvms local serve-node`, and waits until their Nodes are
// Ready; if they are not within nodesUpTimeout and no VM has failed, it boots them once more. A VM that
// does not come up is reported with the end of its console and its kubelet's log.
func (s *sandbox) bootNodes(ctx context.Context, cl *localcluster.Cluster, bins localcluster.Binaries, nodes *nodevm.Nodes, images []string) error {
	configDir := filepath.Join(s.opts.StateDir, "nodeconfig")
	runDir := filepath.Join(s.opts.StateDir, "vms")
	s.cleanup = append(s.cleanup, func(context.Context) error { return os.RemoveAll(configDir) })
	s.cleanup = append(s.cleanup, func(context.Context) error { return os.RemoveAll(runDir) })
	s.say("  nodes: %s (VMs: Debian's kernel under qemu; kubelet, containerd, runc; consoles in %s)",
		strings.Join(nodes.Names(), ", "), filepath.Join(s.opts.StateDir, "console-*.log"))
	timeouts := nodesUpTimeouts
	for attempt, limit := range timeouts {
		machines, consoles, err := s.bootNodesOnce(ctx, cl, bins, nodes, images, configDir, runDir, limit)
		if err == nil {
			s.stops = append(s.stops, func() {
				stopNodes(nodes, machines, 30*time.Second)
				closeAll(consoles)
			})
			return nil
		}
		if machines != nil {
			stopNodes(nodes, machines, 30*time.Second)
		}
		closeAll(consoles)
		if attempt == len(timeouts)-1 || !errors.Is(err, context.DeadlineExceeded) || ctx.Err() != nil {
			return err
		}
		s.say("  the nodes are not Ready after %s (%v): booting the node VMs again", limit, strings.SplitN(err.Error(), "\n", 2)[0])
		s.log.Info("Booting the node VMs again", "reason", err.Error())
	}
	return errors.New("no boot of the node VMs was tried")
}

// bootNodesOnce boots the node VMs and waits at most limit for their Nodes to be Ready.
func (s *sandbox) bootNodesOnce(ctx context.Context, cl *localcluster.Cluster, bins localcluster.Binaries, nodes *nodevm.Nodes, images []string,
	configDir, runDir string, limit time.Duration) (*localvm.Machines, []*os.File, error) {
	vms, err := nodes.VMs(cl, configDir, bins.Node, images, nodeVMTimeout)
	if err != nil {
		return nil, nil, err
	}
	if err := os.RemoveAll(runDir); err != nil {
		return nil, nil, err
	}
	consoles := map[string]*os.File{}
	var files []*os.File
	for _, v := range vms {
		f, err := os.Create(consolePath(s.opts.StateDir, v.Name))
		if err != nil {
			return nil, files, err
		}
		consoles[v.Name] = f
		files = append(files, f)
	}
	// The VMs outlive ctx (Ctrl-C): the teardown stops their kubelets first, then powers them off.
	machines, err := localvm.Boot(context.WithoutCancel(ctx), localvm.BootOptions{
		VMs: vms, Binary: s.opts.Binary, Dir: s.opts.RepoRoot, RunDir: runDir,
		Args:    func(localvm.Options, time.Duration) []string { return ServeNodeArgs },
		Console: func(name string) io.Writer { return lineWriter{consoles[name]} },
		Log:     logWriter{s.log.WithName("vm")},
	})
	if err != nil {
		return nil, files, fmt.Errorf("boot the node VMs: %w", err)
	}
	nodes.Attach(machines)
	cs, err := kubernetes.NewForConfig(s.cfg)
	if err != nil {
		return machines, files, err
	}
	wait, cancel := context.WithTimeout(ctx, limit)
	defer cancel()
	if err := nodes.WaitReady(wait, cs); err != nil {
		var tails []string
		for _, name := range nodes.Names() {
			tails = append(tails, fmt.Sprintf("--- console of %s (last 20 lines of %s)\n%s", name, consolePath(s.opts.StateDir, name), localcluster.Tail(consolePath(s.opts.StateDir, name), 20)))
		}
		return machines, files, fmt.Errorf("%w\n%s\n%s", err, strings.Join(tails, "\n"), nodes.LogTails(20))
	}
	return machines, files, nil
}

func closeAll(files []*os.File) {
	for _, f := range files {
		f.Close()
	}
}

// lineWriter ends each Write (one console line, as localvm gives them) with a newline.
type lineWriter struct{ w io.Writer }

func (l lineWriter) Write(p []byte) (int, error) {
	if _, err := l.w.Write(append(append([]byte(nil), p...), '\n')); err != nil {
		return 0, err
	}
	return len(p), nil
}

func consolePath(stateDir, node string) string {
	return filepath.Join(stateDir, "console-"+node+".log")
}

// stopNodes stops the nodes' kubelets and containerd and waits for their VMs to power off, for at most
// limit; then it powers off what still runs.
func stopNodes(nodes *nodevm.Nodes, machines *localvm.Machines, limit time.Duration) {
	_ = nodes.Stop()
	done := make(chan struct{})
	go func() { machines.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(limit):
		machines.Close()
	}
}

// install installs LVMS as the README's Install section says: the CRDs, then the kubernetes overlay with
// the image `make image` built, and waits for the operator.
func (s *sandbox) install(ctx context.Context) error {
	k := s.kubectlCmd()
	overlay := filepath.Join(s.opts.StateDir, "overlay")
	s.cleanup = append(s.cleanup, func(context.Context) error { return os.RemoveAll(overlay) })
	s.say("  installing LVMS from deploy/ (kubectl apply --server-side -f deploy/crds/ ..., kubectl apply -k deploy/overlays/kubernetes, image %s)", nodevm.LVMSImage)
	if err := Install(ctx, k, overlay, "kubernetes", nodevm.LVMSImage, RealNamespace); err != nil {
		return err
	}
	return nil
}

// kubectlCmd is the control plane's kubectl as the sandbox's admin, in the repository.
func (s *sandbox) kubectlCmd() Kubectl {
	return Kubectl{Binary: s.kubectl, Kubeconfig: KubeconfigPath(s.opts.StateDir), Dir: s.opts.RepoRoot}
}

// applyDemo applies the demo's LVMNodeSet and workload and waits until its pod runs with its data written.
func (s *sandbox) applyDemo(ctx context.Context) error {
	k := s.kubectlCmd()
	for _, f := range []string{"lvmnodeset.yaml", "demo.yaml"} {
		if _, err := k.Run(ctx, "", "apply", "-f", filepath.Join("sandbox", "demo", f)); err != nil {
			return err
		}
	}
	s.say("  applied: LVMNodeSet local (classes thick: xfs, the default; thin: ext4), namespace demo with StatefulSet writer")
	if _, err := k.Run(ctx, "", "-n", "demo", "wait", "pod/writer-0", "--for=condition=Ready", "--timeout=15m"); err != nil {
		return fmt.Errorf("the demo pod did not become Ready: %w", err)
	}
	return nil
}

func (s *sandbox) printRealNextSteps() {
	k := fmt.Sprintf("%s --kubeconfig %s", s.kubectlName(), KubeconfigPath(s.opts.StateDir))
	s.say("\nThe sandbox is up (%s).", ModeReal)
	s.say("The demo pod writer-0 runs with its data on a logical volume. Try (the README's Sandbox section walks through each):")
	s.say("  %s -n demo exec writer-0 -- cat /data/hello", k)
	s.say("  %s get pvc,pv -A; %s -n %s get lvmnodesets,lvmnodes", k, k, RealNamespace)
	s.say("  %s local --print-status", os.Args[0])
	s.say("  %s tui --kubeconfig %s", s.opts.Binary, KubeconfigPath(s.opts.StateDir))
	s.say("  the console: %s", s.consoleURL)
	s.say("Press Ctrl-C to stop: the console, the node VMs and the control plane stop; nothing is left behind.")
}
