package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/lvms-dev/lvms/diagnostics/bundle"
	"github.com/lvms-dev/lvms/diagnostics/bundleserve"
	"github.com/lvms-dev/lvms/hostcheck"
)

// serveOptions are the flags of `lvms bundle serve`.
type serveOptions struct {
	listen        string
	kubeconfigOut string
}

func newBundleServeCommand() *cobra.Command {
	o := &serveOptions{}
	cmd := &cobra.Command{
		Use: "serve BUNDLE",
		Example: `  lvms bundle serve lvms-bundle.tar.gz --kubeconfig-out bundle.kubeconfig
  kubectl --kubeconfig bundle.kubeconfig get lvmnodes -A`,
		Short: "Serve a support bundle as a read-only Kubernetes API for kubectl",
		Long: `Serve a support bundle as a read-only Kubernetes API: kubectl get (tables as the cluster printed them
at collection), describe, -o yaml, label and field selectors, api-resources and logs work against what the
bundle holds. Writes are refused (405). The kubeconfig to use is printed (or written with --kubeconfig-out); the
server runs until interrupted. Kinds the bundle does not hold list as empty, with a warning.`,
		Args: exactArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			return o.run(ctx, cmd, args[0])
		},
	}
	cmd.Flags().StringVar(&o.listen, "listen", "127.0.0.1:0", "address to listen on (port 0: any free port); the API has no authentication, keep it on loopback. "+
		"Only requests addressed to it are answered (localhost too on loopback, and a name given here)")
	cmd.Flags().StringVar(&o.kubeconfigOut, "kubeconfig-out", "", "write the kubeconfig to this new file instead of standard output")
	return cmd
}

func (o *serveOptions) run(ctx context.Context, cmd *cobra.Command, name string) error {
	b, err := bundle.Load(name, bundle.Limits{})
	if err != nil {
		return err
	}
	srv := bundleserve.New(b)
	for _, p := range srv.Problems() {
		fmt.Fprintf(cmd.ErrOrStderr(), "warning: not served: %s\n", p)
	}
	ln, err := net.Listen("tcp", o.listen)
	if err != nil {
		return fmt.Errorf("the bundle cannot be served: %w; stop what uses the address or pass --listen with another", err) // err names the address
	}
	defer func() { _ = ln.Close() }()
	kc, err := bundleserve.Kubeconfig("http://"+ln.Addr().String(), "lvms-bundle")
	if err != nil {
		return err
	}
	hint := "KUBECONFIG=<the kubeconfig above, saved to a file> kubectl get lvmclusters -A"
	if o.kubeconfigOut != "" {
		f, err := os.OpenFile(o.kubeconfigOut, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
		if err != nil {
			return fmt.Errorf("--kubeconfig-out: %w (name a new file: an existing kubeconfig is never overwritten)", err)
		}
		_, werr := f.Write(kc)
		if err := errors.Join(werr, f.Close()); err != nil {
			return fmt.Errorf("--kubeconfig-out: %w", err)
		}
		hint = "KUBECONFIG=" + o.kubeconfigOut + " kubectl get lvmclusters -A"
	} else if _, err := cmd.OutOrStdout().Write(kc); err != nil {
		return err
	}
	fmt.Fprintf(cmd.ErrOrStderr(), "Serving %s (collected %s) read-only at http://%s until interrupted\n%s\n",
		name, b.Manifest.Started.UTC().Format(time.RFC3339), ln.Addr(), hint)
	hs := &http.Server{Handler: srv.AddressedTo(hostcheck.Listening(o.listen, ln.Addr())), ReadHeaderTimeout: 10 * time.Second}
	done := make(chan error, 1)
	go func() { done <- hs.Serve(ln) }()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	return hs.Shutdown(sctx)
}
