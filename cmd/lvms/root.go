package main

import (
	"errors"
	"fmt"
	"log/slog"
	"strings"

	"github.com/go-logr/logr"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	ctrl "sigs.k8s.io/controller-runtime"
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
		// controller-runtime's logger must be set before any of its clients logs: else, 30 s into a run, it
		// prints a goroutine stack on stderr. Commands that run controllers set their own; every other one
		// gets errors only, on its stderr.
		PersistentPreRun: func(cmd *cobra.Command, _ []string) {
			if cmd.Annotations[ownLogger] == "" {
				ctrl.SetLogger(logr.FromSlogHandler(slog.NewTextHandler(cmd.ErrOrStderr(), &slog.HandlerOptions{Level: slog.LevelError})))
			}
		},
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
	oneDefault(root)
	addExitCodes(root)
	return root
}

// addExitCodes ends the --help of every command with more exit codes than 0 and 1 with all of them.
func addExitCodes(c *cobra.Command) {
	path := strings.TrimPrefix(c.CommandPath(), "lvms ")
	for _, e := range exitCodes {
		if e.command == path {
			c.Long += exitCodesHelp(path)
			break
		}
	}
	for _, sub := range c.Commands() {
		addExitCodes(sub)
	}
}

// zeroText is how pflag writes the zero value of a flag type, which it never shows as a default.
var zeroText = map[string]string{"string": "", "strings": "[]", "stringSlice": "[]", "duration": "0s", "bool": "false", "int": "0", "float32": "0"}

// oneDefault keeps --help from showing a flag's default twice: a flag whose description says its default
// itself (one from the environment, say: "(default $POD_NAMESPACE, else openshift-storage)") does not get
// pflag's "(default ...)" after it too.
func oneDefault(c *cobra.Command) {
	c.Flags().VisitAll(func(f *pflag.Flag) {
		if z, ok := zeroText[f.Value.Type()]; ok && strings.Contains(f.Usage, "(default") {
			f.DefValue = z // what pflag takes for "no default to show"
		}
	})
	for _, sub := range c.Commands() {
		oneDefault(sub)
	}
}

// ownLogger annotates the commands that set controller-runtime's logger themselves (they run controllers
// and log at the level their -v asks for).
const ownLogger = "lvms.logger.own"

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
