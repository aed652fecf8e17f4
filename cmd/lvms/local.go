package main

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/spf13/cobra"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/lvms-dev/lvms/localvm"
	"github.com/lvms-dev/lvms/nodevm"
	"github.com/lvms-dev/lvms/operator"
	"github.com/lvms-dev/lvms/operator/names"
	"github.com/lvms-dev/lvms/sandbox"
)

// localOptions are the flags of lvms local.
type localOptions struct {
	stateDir      string
	namespace     string
	repo          string
	printStatus   bool
	consoleListen string
	simulated     bool
}

func newLocalCommand() *cobra.Command {
	o := localOptions{}
	cmd := &cobra.Command{
		Use: "local",
		Example: `  lvms local
  lvms local --print-status
  sudo lvms local --simulated --state-dir /tmp/lvms-local --console-listen 127.0.0.1:9090`,
		Annotations: map[string]string{ownLogger: "true"},
		Short:       "Run a local sandbox cluster: real nodes in VMs, or simulated nodes on loop devices",
		Long: `lvms local starts a control plane (etcd, kube-apiserver, kube-controller-manager, kube-scheduler, the
snapshot controller) and writes a kubeconfig. By default it then boots two node VMs (Debian's kernel under
qemu, running kubelet, containerd and runc, each with three virtio disks), installs LVMS from deploy/ as the
README's Install section says with the image make image builds, applies an LVMNodeSet (classes thick and
thin) and a demo StatefulSet whose pod writes to a volume, and serves the console. Ctrl-C stops the nodes and
the control plane.

With --simulated it registers three simulated Nodes (no kubelet) backed by loop-device disks (as root), runs a
node agent per node and this binary's operator as processes with the flags they are installed with, and
applies sample LVMNodeSets and an LVMCluster: fast, for console work; pods are scheduled but never run. Ctrl-C
removes its loop devices and volume groups.

With --print-status it prints which sandbox runs and the state of its LVMNodeSets, LVMNodes and LVMClusters.`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if o.printStatus {
				return printLocalStatus(cmd, o)
			}
			repo, err := repoRoot(o.repo)
			if err != nil {
				return err
			}
			self, err := os.Executable()
			if err != nil {
				return fmt.Errorf("find this binary to run the operator with: %w", err)
			}
			ns := o.namespace
			if !o.simulated {
				if cmd.Flags().Changed("namespace") && ns != sandbox.RealNamespace {
					return fmt.Errorf("--namespace %s: real nodes install LVMS with deploy/overlays/kubernetes, into %s; --namespace is for --simulated", ns, sandbox.RealNamespace)
				}
				ns = sandbox.RealNamespace
			}
			return sandbox.Run(cmd.Context(), sandbox.Options{
				Real:        !o.simulated,
				StateDir:    o.stateDir,
				Namespace:   ns,
				RepoRoot:    repo,
				Out:         cmd.OutOrStdout(),
				Binary:      self,
				ConsoleAddr: o.consoleListen,
			})
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.stateDir, "state-dir", defaultStateDir(), "directory for the disks, etcd data, kubeconfig and log")
	f.StringVar(&o.repo, "repo", "", "the LVMS checkout (CRDs, control plane build script); default: found from the working directory or this binary")
	f.BoolVar(&o.printStatus, "print-status", false, "print the status of the running sandbox and exit")
	f.StringVar(&o.consoleListen, "console-listen", sandbox.DefaultConsoleAddr, "address the sandbox's console (lvms console) listens on")
	f.BoolVar(&o.simulated, "simulated", false, "simulated nodes on loop devices (no kubelet, no VM) instead of real nodes in VMs")
	f.StringVar(&o.namespace, "namespace", names.DefaultNamespace, "namespace of the LVMS objects (--simulated; real nodes use "+sandbox.RealNamespace+")")
	cmd.AddCommand(newServeNodeCommand())
	return cmd
}

// newServeNodeCommand is what a real-node sandbox's VM runs: it makes the guest a Kubernetes node until
// the sandbox stops it. Hidden: only lvms local starts it, inside its VMs.
func newServeNodeCommand() *cobra.Command {
	return &cobra.Command{
		Use:    "serve-node",
		Short:  "Run a real-node sandbox's node (containerd, kubelet) inside its VM",
		Hidden: true,
		Args:   noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if !localvm.InGuest() {
				return errors.New("lvms local serve-node runs inside the sandbox's node VMs only (lvms local starts it)")
			}
			logf := func(format string, args ...any) { fmt.Fprintf(cmd.OutOrStdout(), format+"\n", args...) }
			return nodevm.Serve(cmd.Context(), logf)
		},
	}
}

func defaultStateDir() string {
	cache := os.Getenv("LVMS_CACHE")
	if cache == "" {
		home, err := os.UserHomeDir()
		if err != nil {
			home = os.TempDir()
		}
		cache = filepath.Join(home, ".cache", "lvms")
	}
	return filepath.Join(cache, "local")
}

// repoRoot finds the checkout: the flag, else the working directory or a parent of it, else the directory
// above this binary (bin/lvms), whichever holds deploy/crds.
func repoRoot(flag string) (string, error) {
	has := func(dir string) bool {
		st, err := os.Stat(filepath.Join(dir, "deploy", "crds"))
		return err == nil && st.IsDir()
	}
	if flag != "" {
		if !has(flag) {
			return "", fmt.Errorf("--repo %s has no deploy/crds", flag)
		}
		return flag, nil
	}
	var candidates []string
	if wd, err := os.Getwd(); err == nil {
		for d := wd; ; d = filepath.Dir(d) {
			candidates = append(candidates, d)
			if filepath.Dir(d) == d {
				break
			}
		}
	}
	if exe, err := os.Executable(); err == nil {
		candidates = append(candidates, filepath.Dir(filepath.Dir(exe)))
	}
	for _, d := range candidates {
		if has(d) {
			return d, nil
		}
	}
	return "", fmt.Errorf("cannot find the LVMS checkout (deploy/crds) from the working directory or the binary; run from the repository or pass --repo")
}

func printLocalStatus(cmd *cobra.Command, o localOptions) error {
	path := sandbox.KubeconfigPath(o.stateDir)
	if _, err := os.Stat(path); err != nil {
		return fmt.Errorf("no running sandbox found (%s is missing): start one with `lvms local` (or make run)", path)
	}
	cfg, err := restConfig(path)
	if err != nil {
		return err
	}
	c, err := client.New(cfg, client.Options{Scheme: operator.NewScheme()})
	if err != nil {
		return fmt.Errorf("connect to the sandbox: %w", err)
	}
	if err := sandbox.PrintMode(o.stateDir, cmd.OutOrStdout()); err != nil {
		return err
	}
	ns := o.namespace
	if running := sandbox.RunningNamespace(o.stateDir); running != "" && !cmd.Flags().Changed("namespace") {
		ns = running
	}
	return sandbox.PrintStatus(cmd.Context(), c, ns, cmd.OutOrStdout())
}
