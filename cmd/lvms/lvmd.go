package main

import (
	"fmt"

	"github.com/spf13/cobra"
	"golang.org/x/sync/errgroup"
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/lvms-dev/lvms/nodeagent/lvm"
	"github.com/lvms-dev/lvms/nodeagent/lvmd"
	"github.com/lvms-dev/lvms/nodeagent/lvmdapi"
)

// DefaultLVMDSocket is where TopoLVM's lvmd listens unless lvmd.yaml says otherwise.
const DefaultLVMDSocket = "/run/topolvm/lvmd.sock"

// lvmdOptions are the flags of lvms lvmd.
type lvmdOptions struct {
	config   string
	socket   string
	logLevel int
}

func newLVMDCommand() *cobra.Command {
	o := lvmdOptions{}
	cmd := &cobra.Command{
		Use:         "lvmd",
		Example:     `  lvms lvmd --config /etc/topolvm/lvmd.yaml --socket /run/topolvm/lvmd.sock`,
		Annotations: map[string]string{ownLogger: "true"},
		Short:       "Serve TopoLVM's lvmd gRPC API on a unix socket",
		Long: `lvms lvmd serves TopoLVM's lvmd gRPC API (LVService, VGService, health) on a unix socket, for the
device classes of an lvmd.yaml in TopoLVM's format. The file is re-read when it changes; no restart needed.
lvm-command-prefix in lvmd.yaml is honoured (its last element is the lvm binary); without it, lvm runs
directly.`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return runLVMD(cmd, o) },
	}
	f := cmd.Flags()
	f.StringVar(&o.config, "config", lvmd.DefaultPath, "lvmd.yaml")
	f.StringVar(&o.socket, "socket", "", "unix socket (default: socket-name from lvmd.yaml, else "+DefaultLVMDSocket+")")
	f.IntVarP(&o.logLevel, "v", "v", 0, "log verbosity (0 info, 1 debug, 2 trace)")
	return cmd
}

func runLVMD(cmd *cobra.Command, o lvmdOptions) error {
	logger := operatorLogger(cmd.ErrOrStderr(), o.logLevel)
	ctrl.SetLogger(logger)
	watcher := lvmd.NewWatcher(o.config, 0)
	cfg, err := watcher.Current()
	if err != nil {
		return fmt.Errorf("read %s: %w", o.config, err)
	}
	runner := lvm.Runner{}
	if p := cfg.LVMCommandPrefix; len(p) > 0 {
		runner.Prefix, runner.LVM = p[:len(p)-1], p[len(p)-1]
	}
	if problems := checkLVMD(cmd, runner, cfg); len(problems) > 0 {
		return fmt.Errorf("lvmd.yaml does not match this node: %v", problems)
	}
	socket := o.socket
	if socket == "" {
		socket = cfg.SocketName
	}
	if socket == "" {
		socket = DefaultLVMDSocket
	}
	server := lvmdapi.NewServer(runner, watcher.Current)
	l, err := lvmdapi.ListenUnix(socket)
	if err != nil {
		return err
	}
	logger.Info("Serving lvmd", "socket", socket, "config", o.config, "deviceClasses", len(cfg.DeviceClasses))
	g, ctx := errgroup.WithContext(cmd.Context())
	g.Go(func() error { return watcher.Run(ctx) })
	g.Go(func() error {
		changes := watcher.Changes()
		for {
			select {
			case <-ctx.Done():
				return nil
			case <-changes:
				server.Notify()
			}
		}
	})
	g.Go(func() error { return lvmdapi.Serve(ctx, l, server) })
	return g.Wait()
}

// checkLVMD refuses to start, as TopoLVM's lvmd does, when a device class's VG or thin pool is missing.
func checkLVMD(cmd *cobra.Command, runner lvm.Runner, cfg *lvmd.Config) []string {
	rep, err := runner.FullReport(cmd.Context())
	if err != nil {
		return []string{err.Error()}
	}
	return cfg.CheckLVM(rep)
}
