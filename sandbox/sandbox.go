package sandbox

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/retry"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/lvms-dev/lvms/localcluster"
	"github.com/lvms-dev/lvms/operator"
)

// Options configure the sandbox.
type Options struct {
	// StateDir holds the disks, the etcd data, the per-node files, the kubeconfig and the log.
	StateDir string
	// Namespace of the LVMS objects.
	Namespace string
	// RepoRoot is the checkout (for deploy/crds and e2e/tools/build.sh).
	RepoRoot string
	// Out receives what the user reads; the detailed log goes to StateDir/sandbox.log.
	Out io.Writer
	// Ready, when set, is called once the sandbox is up, with its kubeconfig path.
	Ready func(kubeconfig string)
	// Binary is the lvms executable the sandbox runs the operator, the node agents and the console with
	// (lvms local passes its own).
	Binary string
	// ConsoleAddr is where the console listens (default DefaultConsoleAddr).
	ConsoleAddr string
	// Real runs real nodes (ModeReal): kubelets in VMs, LVMS installed from deploy/ into Namespace
	// RealNamespace. Otherwise the nodes are simulated (ModeSimulated).
	Real bool
}

// KubeconfigPath is where the sandbox writes its kubeconfig.
func KubeconfigPath(stateDir string) string { return filepath.Join(stateDir, "kubeconfig") }

// sandbox is one running sandbox.
type sandbox struct {
	opts        Options
	log         logr.Logger
	root        bool
	cfg         *rest.Config
	c           client.Client
	nodes       []*SimNode
	consoleURL  string // where lvms console serves the host's browser
	consoleAddr string // where it listens, settled before anything starts (checkConsoleAddr)
	kubectl     string // the kubectl built with the control plane
	stops       []func()
	cleanup     []func(context.Context) error
}

// Run starts the sandbox, waits until ctx is cancelled (Ctrl-C), then tears it down.
func Run(ctx context.Context, opts Options) error {
	if err := os.MkdirAll(opts.StateDir, 0o755); err != nil {
		return fmt.Errorf("create state directory: %w", err)
	}
	lock, err := lockState(opts.StateDir)
	if err != nil {
		return err
	}
	defer lock.Close()
	logFile, err := os.OpenFile(filepath.Join(opts.StateDir, "sandbox.log"), os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o644)
	if err != nil {
		return fmt.Errorf("open the log: %w", err)
	}
	defer logFile.Close()
	logger := logr.FromSlogHandler(slog.NewTextHandler(logFile, &slog.HandlerOptions{Level: slog.LevelDebug}))
	ctrl.SetLogger(logger)
	s := &sandbox{opts: opts, log: logger, root: os.Geteuid() == 0}

	if err := s.cleanUpPrevious(ctx); err != nil {
		return err
	}
	defer s.tearDown()
	if err := s.start(ctx); err != nil {
		return err
	}
	if opts.Ready != nil {
		opts.Ready(KubeconfigPath(opts.StateDir))
	}
	<-ctx.Done()
	if opts.Real {
		s.say("\nStopping the sandbox: console, node VMs (kubelet, containerd), control plane ...")
	} else {
		s.say("\nStopping the sandbox: node agents, operator, volume groups, loop devices, control plane ...")
	}
	return nil
}

func (s *sandbox) say(format string, args ...any) { fmt.Fprintf(s.opts.Out, format+"\n", args...) }

func (s *sandbox) start(ctx context.Context) error {
	if s.opts.Binary == "" {
		return errors.New("no lvms binary to run the operator and node agents with (Options.Binary)")
	}
	if _, err := s.checkConsoleAddr(); err != nil {
		return err
	}
	s.say("Starting the LVMS sandbox (state in %s, log in %s)", s.opts.StateDir, filepath.Join(s.opts.StateDir, "sandbox.log"))
	mode := ModeSimulated
	if s.opts.Real {
		mode = ModeReal
	}
	if err := writeMode(s.opts.StateDir, mode, s.opts.Namespace); err != nil {
		return err
	}
	s.cleanup = append(s.cleanup, func(context.Context) error { return os.Remove(modePath(s.opts.StateDir)) })
	if s.opts.Real {
		return s.startReal(ctx)
	}
	bins, err := FindBinaries(ctx, s.opts.RepoRoot, false)
	if err != nil {
		return err
	}
	if _, err := s.startControlPlane(ctx, localcluster.Options{Binaries: bins}); err != nil {
		return err
	}
	if err := s.installCRDs(ctx); err != nil {
		return err
	}
	if err := s.installIdentities(ctx); err != nil {
		return err
	}
	if err := s.registerNodes(ctx); err != nil {
		return err
	}
	if s.root {
		if err := s.attachDisks(ctx); err != nil {
			return err
		}
		if err := s.startAgents(ctx); err != nil {
			return err
		}
	} else {
		s.say("  Not running as root: no loop-device disks and no node agents (both need root: losetup, lvm2).")
		s.say("  The LVMNodes will wait for their agents' first report. For the full sandbox: sudo %s local", os.Args[0])
	}
	if err := s.startOperator(ctx); err != nil {
		return err
	}
	if err := s.startConsole(ctx); err != nil {
		return err
	}
	if err := s.applySamples(ctx); err != nil {
		return err
	}
	s.printNextSteps(ctx)
	return nil
}

// startControlPlane starts etcd, kube-apiserver, kube-controller-manager, kube-scheduler and the snapshot
// controller (opts' Dir, Binaries and Log are set here) and writes the admin kubeconfig.
func (s *sandbox) startControlPlane(ctx context.Context, opts localcluster.Options) (*localcluster.Cluster, error) {
	s.kubectl = filepath.Join(opts.Binaries.Node, "kubectl")
	dir := filepath.Join(s.opts.StateDir, "cluster")
	if err := os.RemoveAll(dir); err != nil {
		return nil, fmt.Errorf("clear %s: %w", dir, err)
	}
	s.say("  control plane: etcd, kube-apiserver, kube-controller-manager, kube-scheduler, snapshot controller (logs in %s)", dir)
	opts.Dir, opts.SnapshotController, opts.Log = dir, true, logWriter{s.log.WithName("cluster")}
	cl, err := localcluster.Start(ctx, opts)
	if err != nil {
		return nil, fmt.Errorf("start the control plane: %w\n%s", err, localcluster.LogTails(dir, 20))
	}
	s.cleanup = append(s.cleanup, func(context.Context) error { return errors.Join(cl.Stop(), os.RemoveAll(dir)) })
	cfg := rest.CopyConfig(cl.Config)
	cfg.QPS, cfg.Burst = 200, 400
	s.cfg = cfg
	if s.c, err = client.New(cfg, client.Options{Scheme: operator.NewScheme()}); err != nil {
		return nil, fmt.Errorf("client: %w", err)
	}
	kc, err := os.ReadFile(cl.AdminKubeconfig)
	if err != nil {
		return nil, fmt.Errorf("read the admin kubeconfig: %w", err)
	}
	path := KubeconfigPath(s.opts.StateDir)
	if err := os.WriteFile(path, kc, 0o600); err != nil {
		return nil, fmt.Errorf("write kubeconfig: %w", err)
	}
	s.cleanup = append(s.cleanup, func(context.Context) error { return os.Remove(path) })
	return cl, nil
}

// installCRDs installs LVMS's CRDs and creates the namespace, for the simulated sandbox's processes.
func (s *sandbox) installCRDs(ctx context.Context) error {
	crds := []string{filepath.Join(s.opts.RepoRoot, "deploy", "crds"), filepath.Join(s.opts.RepoRoot, "deploy", "crds", "legacy")}
	if _, err := envtest.InstallCRDs(s.cfg, envtest.CRDInstallOptions{Paths: crds, ErrorIfPathMissing: true, Scheme: operator.NewScheme()}); err != nil {
		return fmt.Errorf("install the CRDs from %s: %w (run from the repository or pass --repo)", crds[0], err)
	}
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: s.opts.Namespace}}
	if err := s.c.Create(ctx, ns); err != nil {
		return fmt.Errorf("create namespace %s: %w", s.opts.Namespace, err)
	}
	return nil
}

// logWriter sends the control plane's progress lines to the sandbox log.
type logWriter struct{ log logr.Logger }

func (w logWriter) Write(p []byte) (int, error) {
	w.log.Info(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

// registerNodes creates the Node objects and, playing the kubelet, marks them Ready.
func (s *sandbox) registerNodes(ctx context.Context) error {
	for _, spec := range Topology() {
		labels := map[string]string{"kubernetes.io/hostname": spec.Name, "kubernetes.io/os": "linux"}
		for k, v := range spec.Labels {
			labels[k] = v
		}
		n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: spec.Name, Labels: labels}}
		if err := s.c.Create(ctx, n); err != nil {
			return fmt.Errorf("register Node %s: %w", spec.Name, err)
		}
		// kube-controller-manager writes the new Node too (taints, annotations): read it again on a conflict.
		if err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
			if err := s.c.Get(ctx, client.ObjectKeyFromObject(n), n); err != nil {
				return err
			}
			now := metav1.Now()
			n.Status = corev1.NodeStatus{
				Capacity: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("2"), corev1.ResourceMemory: resource.MustParse("4Gi"), corev1.ResourcePods: resource.MustParse("110")},
				Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue, Reason: "KubeletReady",
					Message: "simulated by lvms local", LastHeartbeatTime: now, LastTransitionTime: now}},
			}
			n.Status.Allocatable = n.Status.Capacity
			return s.c.Status().Update(ctx, n)
		}); err != nil {
			return fmt.Errorf("mark Node %s Ready: %w", spec.Name, err)
		}
	}
	hb, cancel := context.WithCancel(context.WithoutCancel(ctx))
	done := make(chan struct{})
	go func() {
		defer close(done)
		var wg sync.WaitGroup
		for _, spec := range Topology() {
			wg.Go(func() { s.heartbeat(hb, spec.Name) })
		}
		wg.Wait()
	}()
	s.stops = append(s.stops, func() { cancel(); <-done })
	s.say("  nodes: lvms-local-1, lvms-local-2 (v2 API), lvms-local-3 (v1 API); simulated: no kubelet, the sandbox renews their node Leases")
	return nil
}

func (s *sandbox) nodeDir(name string) string { return filepath.Join(s.opts.StateDir, "nodes", name) }
func (s *sandbox) diskFile(node, disk string) string {
	return filepath.Join(s.opts.StateDir, "disks", node+"-"+disk+".img")
}

// Node is the simulated node name of the sandbox whose state is in stateDir, as its agent sees it: its
// /dev/disk/by-id view, its lvm2 (its own system directory and devices file, no activation) and its
// lvmd.yaml. It prepares the node's directory.
func Node(stateDir, name string) (*SimNode, error) {
	sim, err := NewSimNode(filepath.Join(stateDir, "nodes", name), name, devicesFile(stateDir, name))
	if err != nil {
		return nil, err
	}
	return sim, sim.WithoutActivation()
}

// devicesFile names a node's LVM devices file after the state directory too, so that two sandboxes (or a
// sandbox and its own test) never share one.
func devicesFile(stateDir, node string) string {
	sum := sha256.Sum256([]byte(filepath.Clean(stateDir)))
	return "lvms-local-" + hex.EncodeToString(sum[:4]) + "-" + node + ".devices"
}

// attachDisks gives every node its loop-device disks and its own /dev/disk/by-id view of them.
func (s *sandbox) attachDisks(ctx context.Context) error {
	for _, spec := range Topology() {
		sim, err := Node(s.opts.StateDir, spec.Name)
		if err != nil {
			return err
		}
		for _, d := range spec.Disks {
			file := s.diskFile(spec.Name, d.Name)
			// Registered before attaching: a half-attached disk is cleaned up too.
			s.cleanup = append(s.cleanup, func(ctx context.Context) error { return DetachDisk(ctx, file) })
			disk, err := AttachDisk(ctx, file, d)
			if err != nil {
				return fmt.Errorf("node %s: %w", spec.Name, err)
			}
			if err := sim.Link(d.Name, disk.Device); err != nil {
				return err
			}
			s.say("  %s: %s = %s (%s%s)", spec.Name, LinkName(d.Name), disk.Device, size(d.Size), prepNote(d.Prep))
		}
		s.nodes = append(s.nodes, sim)
		// Volume groups go before the loop devices under them (cleanups run in reverse).
		s.cleanup = append(s.cleanup, sim.CleanupLVM)
	}
	return nil
}

func prepNote(p Prep) string {
	switch p {
	case PrepExt4:
		return ", ext4 file system"
	case PrepPartitioned:
		return ", partition table"
	}
	return ""
}

func size(b int64) string {
	if b%gib == 0 {
		return fmt.Sprintf("%dGi", b/gib)
	}
	return fmt.Sprintf("%dMi", b/mib)
}

func (s *sandbox) applySamples(ctx context.Context) error {
	sets, cluster := Samples(s.opts.Namespace)
	for _, set := range sets {
		if err := s.c.Create(ctx, set); err != nil {
			return fmt.Errorf("apply LVMNodeSet %s: %w", set.Name, err)
		}
	}
	if err := s.c.Create(ctx, cluster); err != nil {
		return fmt.Errorf("apply LVMCluster %s: %w", cluster.Name, err)
	}
	s.say("  applied: LVMNodeSets volumes and thin (nodes 1 and 2), LVMCluster sandbox (node 3)")
	return nil
}

func (s *sandbox) printNextSteps(ctx context.Context) {
	k := fmt.Sprintf("%s --kubeconfig %s", s.kubectlName(), KubeconfigPath(s.opts.StateDir))
	s.say("\nThe sandbox is up (%s). Try:", ModeSimulated)
	s.say("  %s -n %s get lvmnodesets,lvmnodes,lvmclusters", k, s.opts.Namespace)
	s.say("  %s local --print-status        (the same, without kubectl)", os.Args[0])
	s.say("  %s apply -f %s   (a claim of lvms-vg1 and a pod: Bound on lvms-local-3)", k, filepath.Join(s.opts.RepoRoot, "sandbox", "testdata", "claim.yaml"))
	s.say("  %s apply -f %s   (a claim of lvms-data on lvms-local-1 to move: the README's Sandbox section)", k, filepath.Join(s.opts.RepoRoot, "sandbox", "testdata", "move.yaml"))
	s.say("  the console: %s", s.consoleURL)
	s.say("Press Ctrl-C to stop: the agents, operator and console stop, the volume groups and loop devices are removed.")
	if ctx.Err() != nil {
		return
	}
	wait, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if err := WaitSettled(wait, s.c, s.opts.Namespace); err == nil {
		s.say("")
		if err := PrintStatus(ctx, s.c, s.opts.Namespace, s.opts.Out); err != nil {
			s.log.Error(err, "Failed to print the status")
		}
	}
}

// kubectlName is the kubectl to tell the user of: the one on PATH, else the control plane's.
func (s *sandbox) kubectlName() string {
	if _, err := exec.LookPath("kubectl"); err != nil {
		return s.kubectl
	}
	return "kubectl"
}

// tearDown stops what runs and undoes what was set up, in reverse order, and reports what failed.
func (s *sandbox) tearDown() {
	for i := len(s.stops) - 1; i >= 0; i-- {
		s.stops[i]()
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var errs []error
	for i := len(s.cleanup) - 1; i >= 0; i-- {
		if err := s.cleanup[i](ctx); err != nil {
			errs = append(errs, err)
		}
	}
	if err := errors.Join(errs...); err != nil {
		s.say("Cleanup incomplete: %v", err)
		return
	}
	s.say("Stopped; nothing left behind.")
}

// cleanUpPrevious removes what a sandbox that did not stop cleanly left in the state directory: its
// control plane processes, volume groups, loop devices and etcd data.
func (s *sandbox) cleanUpPrevious(ctx context.Context) error {
	killed, err := killLeftovers(s.opts.StateDir)
	if err != nil {
		return err
	}
	var found []string
	if len(killed) > 0 {
		found = append(found, fmt.Sprintf("%d control plane processes", len(killed)))
	}
	if s.root {
		for _, spec := range Topology() {
			if _, err := os.Stat(s.nodeDir(spec.Name)); err != nil {
				continue
			}
			sim, err := Node(s.opts.StateDir, spec.Name)
			if err != nil {
				return err
			}
			if _, err := os.Stat(sim.Runner.DevicesFilePath()); err == nil {
				found = append(found, "volume groups of "+spec.Name)
				if err := sim.CleanupLVM(ctx); err != nil {
					return fmt.Errorf("clean up after the previous run: %w", err)
				}
			}
		}
		loops, err := loopsUnder(ctx, filepath.Join(s.opts.StateDir, "disks"))
		if err != nil {
			return err
		}
		for _, dev := range loops {
			found = append(found, dev)
			if out, err := exec.CommandContext(ctx, "losetup", "--detach", dev).CombinedOutput(); err != nil {
				return fmt.Errorf("detach %s left by the previous run: %w: %s", dev, err, out)
			}
		}
	}
	if err := os.RemoveAll(filepath.Join(s.opts.StateDir, "disks")); err != nil {
		return err
	}
	if len(found) > 0 {
		s.say("Cleaned up after a previous run that did not stop cleanly: %v", found)
	}
	return nil
}
