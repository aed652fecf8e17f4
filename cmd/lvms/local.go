package main

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/spf13/cobra"
	"sigs.k8s.io/controller-runtime/pkg/client"

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
}

func newLocalCommand() *cobra.Command {
	o := localOptions{}
	cmd := &cobra.Command{
		Use: "local",
		Example: `  sudo lvms local
  lvms local --print-status
  sudo lvms local --state-dir /tmp/lvms-local --console-listen 127.0.0.1:9090`,
		Annotations: map[string]string{ownLogger: "true"},
		Short:       "Run a local sandbox cluster with simulated nodes and loop-device disks",
		Long: `lvms local starts a control plane (etcd, kube-apiserver, kube-controller-manager, kube-scheduler, the
snapshot controller), registers three simulated Nodes (no kubelet) backed by loop-device disks (as root),
runs a node agent per node, runs this binary's operator with the flags it is installed with, applies sample
LVMNodeSets and an LVMCluster, and writes a kubeconfig. Ctrl-C stops it and removes its loop devices and
volume groups.

With --print-status it prints the state of a running sandbox's LVMNodeSets, LVMNodes and LVMClusters.`,
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
			return sandbox.Run(cmd.Context(), sandbox.Options{
				StateDir:    o.stateDir,
				Namespace:   o.namespace,
				RepoRoot:    repo,
				Out:         cmd.OutOrStdout(),
				Binary:      self,
				ConsoleAddr: o.consoleListen,
			})
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.stateDir, "state-dir", defaultStateDir(), "directory for the disks, etcd data, kubeconfig and log")
	f.StringVar(&o.namespace, "namespace", names.DefaultNamespace, "namespace of the LVMS objects")
	f.StringVar(&o.repo, "repo", "", "the LVMS checkout (CRDs, control plane build script); default: found from the working directory or this binary")
	f.BoolVar(&o.printStatus, "print-status", false, "print the status of the running sandbox and exit")
	f.StringVar(&o.consoleListen, "console-listen", sandbox.DefaultConsoleAddr, "address the sandbox's console (lvms console) listens on")
	return cmd
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
	return sandbox.PrintStatus(cmd.Context(), c, o.namespace, cmd.OutOrStdout())
}
