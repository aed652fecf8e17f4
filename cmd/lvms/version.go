package main

import (
	"fmt"
	"runtime"

	"github.com/spf13/cobra"
)

// Set by the Makefile with -ldflags -X.
var (
	version = "dev"
	commit  = "unknown"
)

func newVersionCommand() *cobra.Command {
	return &cobra.Command{
		Use:     "version",
		Example: `  lvms version`,
		Short:   "Print the version, commit and Go version",
		Args:    noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			_, err := fmt.Fprintf(cmd.OutOrStdout(), "lvms %s\ncommit: %s\ngo: %s %s/%s\n",
				version, commit, runtime.Version(), runtime.GOOS, runtime.GOARCH)
			return err
		},
	}
}
