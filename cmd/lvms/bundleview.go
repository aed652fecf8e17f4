package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/lvms-dev/lvms/console"
	"github.com/lvms-dev/lvms/diagnostics/analyze"
	"github.com/lvms-dev/lvms/diagnostics/bundle"
	"github.com/lvms-dev/lvms/tui"
	"github.com/lvms-dev/lvms/web"
)

// bundleView is a support bundle opened for the console or the TUI: its source and its findings.
type bundleView struct {
	name     string
	src      *bundle.Source
	findings []analyze.Finding
	web      *web.Bundle
}

// openBundleView loads a bundle and analyzes it with this lvms's analyzers.
func openBundleView(name string) (*bundleView, error) {
	src, err := bundle.LoadSource(name, bundle.Limits{})
	if err != nil {
		return nil, err
	}
	b := src.Bundle()
	fs := analyze.Run(b)
	return &bundleView{name: name, src: src, findings: fs, web: &web.Bundle{Name: name, At: b.Manifest.Started, Findings: fs}}, nil
}

// title names the bundle for messages.
func (v *bundleView) title() string {
	return "support bundle " + v.name + " (" + v.src.Bundle().Manifest.Cluster + ", collected " +
		v.src.Bundle().Manifest.Started.UTC().Format("2006-01-02 15:04:05Z") + ", read-only)"
}

// sources gives every request the bundle, whoever asks.
func (v *bundleView) sources(context.Context, string) (console.Source, error) { return v.src, nil }

// runTUIOnBundle opens the terminal console on a bundle.
func runTUIOnBundle(cmd *cobra.Command, name string) error {
	v, err := openBundleView(name)
	if err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := needTerminal(cmd); err != nil {
		return err
	}
	return tui.Run(ctx, tui.Options{Source: v.src, Bundle: &tui.Bundle{Name: name, At: v.src.Bundle().Manifest.Started, Findings: v.findings}},
		cmd.InOrStdin(), cmd.OutOrStdout())
}
