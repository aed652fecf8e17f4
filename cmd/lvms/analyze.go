package main

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/lvms-dev/lvms/diagnostics/analyze"
	"github.com/lvms-dev/lvms/diagnostics/bundle"
)

// analyzeOptions are the flags of `lvms analyze`.
type analyzeOptions struct {
	output string
	all    bool
	failOn string
}

func newAnalyzeCommand() *cobra.Command {
	o := &analyzeOptions{}
	cmd := &cobra.Command{
		Use: "analyze BUNDLE",
		Example: `  lvms analyze lvms-bundle-prod-20261202T101500Z.tar.gz
  lvms analyze --all must-gather.local.1234/
  lvms analyze --fail-on warn -o json lvms-bundle.tar.gz > analysis.json`,
		Short: "Analyze a support bundle and print findings with fixes",
		Long: `Run every analyzer of this lvms over a support bundle (a .tar.gz from 'lvms bundle' or a must-gather
directory) and print the findings, worst first: what is wrong, on which node and object, and what to do.
The analyzers are pure: they read the bundle only, never the cluster.`,
		Args: exactArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			threshold := analyze.Severity(o.failOn)
			if o.failOn != "" && threshold != analyze.Warn && threshold != analyze.Fail {
				return fmt.Errorf("--fail-on %q: use warn or fail", o.failOn)
			}
			b, err := bundle.Load(args[0], bundle.Limits{})
			if err != nil {
				return err
			}
			fs := analyze.Run(b)
			out := cmd.OutOrStdout()
			if o.output == "json" {
				data, err := analyze.Marshal(fs)
				if err != nil {
					return err
				}
				if _, err := out.Write(data); err != nil {
					return err
				}
			} else {
				m := b.Manifest
				if _, err := fmt.Fprintf(out, "Bundle of %s collected %s by %s (lvms %s)\n\n", m.Cluster, m.Started.Format("2006-01-02 15:04:05 MST"),
					orUnknownUser(m.User), m.Version); err != nil {
					return err
				}
				if err := analyze.WriteText(out, fs, o.all); err != nil {
					return err
				}
			}
			if threshold != "" {
				for _, f := range fs {
					if f.Severity.Rank() >= threshold.Rank() {
						return &exitError{code: exitFound, err: fmt.Errorf("findings at or above %s (listed above)", threshold)}
					}
				}
			}
			return nil
		},
	}
	addOutputFlag(cmd.Flags(), &o.output, "text", "json")
	cmd.Flags().BoolVar(&o.all, "all", false, "also print every passing check")
	cmd.Flags().StringVar(&o.failOn, "fail-on", "", "exit with code 2 when a finding is at least this severe (warn or fail); 1 stays for errors")
	return cmd
}

func orUnknownUser(u string) string {
	if u == "" {
		return "an unknown user"
	}
	return u
}
