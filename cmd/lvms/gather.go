package main

import (
	"fmt"
	"os"
	"time"

	"github.com/spf13/cobra"

	"github.com/lvms-dev/lvms/diagnostics/collect"
)

// gatherOptions are the flags of the hidden `lvms gather`, the must-gather image's entrypoint.
type gatherOptions struct {
	bundleOptions
	dest string
}

func newGatherCommand() *cobra.Command {
	o := &gatherOptions{bundleOptions: bundleOptions{agentAccess: collect.AccessDirect}}
	cmd := &cobra.Command{
		Use: "gather",
		Example: `  oc adm must-gather --image=quay.io/lvms/lvms:latest
  lvms gather --dest /tmp/must-gather --since 24h`,
		Hidden: true,
		Short:  "must-gather entrypoint: collect a support bundle into /must-gather",
		Long: `The image's /usr/bin/gather (oc adm must-gather's entrypoint, a link to lvms): collect the same
bundle as 'lvms bundle', as files under /must-gather (oc adm must-gather copies the directory), with the
in-cluster service account, reaching the node agents directly on their pod IPs. MUST_GATHER_SINCE (a
duration) and MUST_GATHER_SINCE_TIME (RFC3339), set by oc adm must-gather --since/--since-time, bound logs
and events.`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if o.since == 0 && o.sinceTime == "" {
				if v := os.Getenv("MUST_GATHER_SINCE_TIME"); v != "" {
					o.sinceTime = v
				} else if v := os.Getenv("MUST_GATHER_SINCE"); v != "" {
					d, err := time.ParseDuration(v)
					if err != nil {
						return fmt.Errorf("MUST_GATHER_SINCE %q: %w", v, err)
					}
					o.since = d
				}
			}
			opts, err := o.collectOptions(cmd)
			if err != nil {
				return err
			}
			if err := os.MkdirAll(o.dest, 0o755); err != nil {
				return fmt.Errorf("create %s: %w", o.dest, err)
			}
			start := o.now()
			sum, err := collect.WriteDir(cmd.Context(), opts, o.dest)
			if err != nil {
				return fmt.Errorf("gather into %s: %w", o.dest, err)
			}
			return printSummary(cmd.OutOrStdout(), o.dest, sum.Bytes, sum, o.clock.Since(start))
		},
	}
	o.addCollectionFlags(cmd)
	cmd.Flags().StringVar(&o.dest, "dest", "/must-gather", "directory to write into")
	return cmd
}
