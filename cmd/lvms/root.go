package main

import (
	"errors"
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
		newMigrateCommand(),
		newMoveCommand(),
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
		RunE: func(cmd *cobra.Command, _ []string) error {
			return fmt.Errorf("%s is not yet available in this build", cmd.CommandPath())
		},
	}
}

// exitError is an error with its own exit code (1 for every other error).
type exitError struct {
	code int
	err  error
}

func (e *exitError) Error() string { return e.err.Error() }
func (e *exitError) Unwrap() error { return e.err }

// exitCode is the process exit code for err returned by a command.
func exitCode(err error) int {
	var e *exitError
	if errors.As(err, &e) {
		return e.code
	}
	return 1
}
