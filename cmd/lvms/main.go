// Command lvms is the one binary of LVMS: operator, node agent, lvmd, console, TUI, support tools and the
// local sandbox are its subcommands. This file only wires them; each lives beside the package it runs.
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := newRootCommand().ExecuteContext(ctx)
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "error:", err)
		os.Exit(1)
	}
}
