// Command lvms is the one binary of LVMS: operator, node agent, lvmd, console, TUI, support tools and the
// local sandbox are its subcommands. This file only wires them; each lives beside the package it runs.
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	cmd := newRootCommand()
	// The image's /usr/bin/gather (oc adm must-gather's entrypoint) is a link to lvms.
	if filepath.Base(os.Args[0]) == "gather" {
		cmd.SetArgs(append([]string{"gather"}, os.Args[1:]...))
	}
	err := cmd.ExecuteContext(ctx)
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "error:", err)
		os.Exit(exitCode(err))
	}
}
