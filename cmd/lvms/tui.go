package main

import (
	"errors"
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/cobra"
	"golang.org/x/term"

	"github.com/lvms-dev/lvms/console/live"
	"github.com/lvms-dev/lvms/migrate/wizard"
	"github.com/lvms-dev/lvms/operator/names"
	"github.com/lvms-dev/lvms/tui"
)

// tuiOptions are the flags of `lvms tui`.
type tuiOptions struct {
	kubeconfig string
	context    string
	bundle     string
	namespace  string
}

func newTUICommand() *cobra.Command {
	o := &tuiOptions{}
	cmd := &cobra.Command{
		Use: "tui",
		Example: `  lvms tui
  lvms tui --context prod -n openshift-storage
  lvms tui --bundle lvms-bundle.tar.gz`,
		Short: "Open the terminal admin console for a cluster",
		Long: `Open the LVMS terminal console: nodes, their volume groups and devices with what differs from the desired
state, why every excluded device was excluded and what to do about it, device classes, volumes and events.
It updates on every change in the cluster and reads with the kubeconfig's credentials only.

Keys: ? help, / filter, : jump (nodes, node <name>, dc, volumes, events, migrate [name]), j/k move,
enter open, esc back, r refresh, q quit.

M (or :migrate [name]) opens the guided migration of a v1alpha1 LVMCluster to v2alpha1 LVMNodeSets, with
the same steps as lvms migrate and the web console: Plan (the report; a accepts a lossy plan), Preflight
(every check with its reason and fix), Apply (asks y/n, then shows a progress bar and every node: handed
over, in progress or pending), Verify (before and after compared) and Roll back (asks y/n). A step you
cannot take says why, and names every permission you lack for it. s stops the running step; quitting
stops it too, and apply resumes where it stopped. LVMClusters are listed in every namespace, or in
--namespace when you may not list them everywhere.

With --bundle FILE it shows a support bundle (lvms bundle, must-gather) instead of a cluster, read-only;
:findings lists the analyzers' findings.`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if o.bundle != "" {
				return runTUIOnBundle(cmd, o.bundle)
			}
			cfg, cluster, err := kubeConfig(o.kubeconfig, o.context)
			if err != nil {
				return err
			}
			if err := needTerminal(cmd); err != nil {
				return err
			}
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			src := live.New(ctx, cfg, live.Options{Cluster: cluster})
			// The wizard acts with the same credentials as the rest of the UI, as lvms migrate does.
			c, err := (&migrateRunOptions{kubeconfig: o.kubeconfig, context: o.context, namespace: o.namespace}).client()
			if err != nil {
				return err
			}
			mig := &tui.Migration{Client: c, Runner: wizard.NewRunner(ctx, nil), Namespace: o.namespace}
			return tui.Run(ctx, tui.Options{Source: src, Migration: mig}, cmd.InOrStdin(), cmd.OutOrStdout())
		},
	}
	cmd.Flags().StringVar(&o.kubeconfig, "kubeconfig", "", kubeconfigUsage)
	cmd.Flags().StringVar(&o.context, "context", "", "kubeconfig context (default: the current context)")
	cmd.Flags().StringVarP(&o.namespace, "namespace", "n", names.DefaultNamespace, "namespace of the LVMClusters to migrate when you may not list them in every namespace")
	cmd.Flags().StringVar(&o.bundle, "bundle", "", "show a support bundle (from lvms bundle or must-gather) read-only, with its analyzers' findings, instead of a cluster")
	return cmd
}

// errNoTerminal is lvms tui's answer when stdin or stdout is not a terminal (a pipe, a file, CI).
var errNoTerminal = errors.New("lvms tui needs an interactive terminal; use lvms console for the web console and its JSON API (/api/v1), or lvms bundle")

// needTerminal checks for a terminal before the TUI writes any escape code.
func needTerminal(cmd *cobra.Command) error {
	for _, s := range []any{cmd.InOrStdin(), cmd.OutOrStdout()} {
		f, ok := s.(*os.File)
		if !ok || !term.IsTerminal(int(f.Fd())) {
			return errNoTerminal
		}
	}
	return nil
}
