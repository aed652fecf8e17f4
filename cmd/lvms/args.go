package main

import (
	"fmt"
	"strings"

	"github.com/spf13/cobra"
)

// Positional argument checks whose errors name what is missing or extra, by the names the usage line
// gives them (BUNDLE, A B, FILE DIR), and show that line.

// argNames are the positional arguments of cmd's usage line: its upper-case words before the first flag.
func argNames(cmd *cobra.Command) []string {
	var names []string
	for _, w := range strings.Fields(cmd.Use)[1:] {
		if strings.HasPrefix(w, "-") {
			break
		}
		names = append(names, strings.Trim(w, "[]"))
	}
	return names
}

func usageLine(cmd *cobra.Command) string { return "usage: " + cmd.UseLine() }

// exactArgs wants exactly the arguments the usage line names.
func exactArgs(cmd *cobra.Command, args []string) error {
	names := argNames(cmd)
	switch {
	case len(args) < len(names):
		return fmt.Errorf("%s: missing %s (%s)", cmd.CommandPath(), strings.Join(names[len(args):], " and "), usageLine(cmd))
	case len(args) > len(names):
		return fmt.Errorf("%s: too many arguments: %q is more than %s (%s)", cmd.CommandPath(), strings.Join(args[len(names):], " "), strings.Join(names, " "), usageLine(cmd))
	}
	return nil
}

// optionalArg takes the usage line's one optional argument, or none.
func optionalArg(cmd *cobra.Command, args []string) error {
	if len(args) > 1 {
		return fmt.Errorf("%s: too many arguments: %q after %s (%s)", cmd.CommandPath(), strings.Join(args[1:], " "), args[0], usageLine(cmd))
	}
	return nil
}

// noArgs takes no positional argument.
func noArgs(cmd *cobra.Command, args []string) error {
	if len(args) > 0 {
		return fmt.Errorf("%s takes no arguments, got %q (%s)", cmd.CommandPath(), strings.Join(args, " "), usageLine(cmd))
	}
	return nil
}
