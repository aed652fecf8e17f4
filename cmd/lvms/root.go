package main

import (
	"fmt"

	"github.com/spf13/cobra"
)

func newRootCommand() *cobra.Command {
	root := &cobra.Command{
		Use:   "lvms",
		Short: "LVM storage for Kubernetes, OpenShift and MicroShift",
		Long: `lvms runs every part of LVMS: the operator, the node agent with its TopoLVM-compatible CSI driver,
lvmd, the admin console (web and terminal), support bundles and analysis, migration from v1alpha1 to
v2alpha1, and a local sandbox cluster.`,
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.AddCommand(
		newVersionCommand(),
		newOperatorCommand(),
		newNodeagentCommand(),
		newLVMDCommand(),
		newConsoleCommand(),
		newTUICommand(),
		newBundleCommand(),
		newAnalyzeCommand(),
		newGatherCommand(),
		notYet("migrate", "Plan and run the migration from v1alpha1 LVMCluster to v2alpha1 LVMNodeSets"),
		newLocalCommand(),
	)
	return root
}

// notYet registers a subcommand whose implementation has not landed, so --help lists the whole tool and
// calling it says so plainly instead of doing nothing.
func notYet(name, short string) *cobra.Command {
	return &cobra.Command{
		Use:                name,
		Short:              short + " (not yet available)",
		DisableFlagParsing: true,
		RunE: func(*cobra.Command, []string) error {
			return fmt.Errorf("lvms %s is not yet available in this build", name)
		},
	}
}
