package main

import (
	"context"
	"errors"
	"fmt"
	authenticationv1 "k8s.io/api/authentication/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/lvms-dev/lvms/console/live"
	"github.com/lvms-dev/lvms/migrate/wizard"
	"github.com/lvms-dev/lvms/web"
)

// consoleOptions are the flags of `lvms console`.
type consoleOptions struct {
	kubeconfig   string
	context      string
	listen       string
	requireToken bool
	verbose      bool
	bundle       string
}

func newConsoleCommand() *cobra.Command {
	o := &consoleOptions{}
	cmd := &cobra.Command{
		Use: "console",
		Example: `  lvms console
  lvms console --kubeconfig ~/.kube/config --context prod --listen 127.0.0.1:9090
  lvms console --bundle lvms-bundle.tar.gz`,
		Short: "Serve the web admin console for a cluster",
		Long: `Serve the LVMS web console: desired vs actual storage per node, volume group and device, why every
excluded device was excluded and what to do about it, device classes, volumes and events, refreshed live.
It also serves the JSON API (/api/v1) the OpenShift console plugin reads.

Every request reads the cluster as its caller: with the bearer token of the request (Authorization: Bearer)
when there is one, else with the kubeconfig's credentials. The console writes only when a caller takes a
step of the migration wizard (/migration: plan, preflight, apply, verify, roll back an LVMCluster's move to
LVMNodeSets), with that caller's credentials, after the API server confirms the caller may; its forms are
POST only, carry a CSRF token and must come from the console's own page.
By default it listens on 127.0.0.1 only; on another address, use --require-token so nobody reaches the
cluster with the kubeconfig's credentials.

With --bundle FILE it shows a support bundle (lvms bundle, must-gather) instead of a cluster: the same pages,
read-only, with the bundle's time on every page and a Findings page with the analyzers' findings.`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return o.run(cmd) },
	}
	f := cmd.Flags()
	f.StringVar(&o.kubeconfig, "kubeconfig", "", kubeconfigUsage)
	f.StringVar(&o.context, "context", "", "kubeconfig context (default: the current context)")
	f.StringVar(&o.listen, "listen", "127.0.0.1:8080", "address to serve on")
	f.BoolVar(&o.requireToken, "require-token", false, "refuse requests without a bearer token instead of using the kubeconfig's credentials")
	f.BoolVar(&o.verbose, "verbose", false, "log every request (-v is a log level in the commands that take one, as in kubectl)")
	f.StringVar(&o.bundle, "bundle", "", "show a support bundle (from lvms bundle or must-gather) read-only, with its analyzers' findings, instead of a cluster")
	return cmd
}

func (o *consoleOptions) run(cmd *cobra.Command) error {
	var cfg *rest.Config
	var cluster string
	var offline *bundleView
	var err error
	if o.bundle != "" {
		if offline, err = openBundleView(o.bundle); err != nil {
			return err
		}
		cluster = offline.title()
	} else if cfg, cluster, err = kubeConfig(o.kubeconfig, o.context); err != nil {
		return err
	}
	level := slog.LevelInfo
	if o.verbose {
		level = slog.LevelDebug
	}
	logger := slog.New(slog.NewTextHandler(cmd.ErrOrStderr(), &slog.HandlerOptions{Level: level}))
	ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	ln, err := net.Listen("tcp", o.listen)
	if err != nil {
		// err names the address already ("listen tcp 127.0.0.1:8080: bind: address already in use").
		return fmt.Errorf("the console cannot serve: %w; stop what uses the address or pass --listen with another", err)
	}
	if host, _, _ := net.SplitHostPort(ln.Addr().String()); !o.requireToken && !net.ParseIP(host).IsLoopback() {
		logger.Warn("Serving on a non-loopback address without --require-token: anyone who reaches it reads the cluster "+
			"with the kubeconfig's credentials", "address", ln.Addr().String())
	}
	wo := web.Options{RequireToken: o.requireToken, LocalOnly: !o.requireToken, Logger: logger}
	if offline != nil {
		wo.Sources, wo.Bundle, wo.RequireToken = offline.sources, offline.web, false
	} else {
		review, err := tokenReviewer(cfg)
		if err != nil {
			return err
		}
		pool := live.NewPool(ctx, cfg, live.Options{Cluster: cluster, TokenReview: review}, 0)
		wo.Sources, wo.Server, wo.Cluster = pool.For, cfg.Host, cluster
		wo.Migration = &web.Migration{Clients: pool.Client, Runner: wizard.NewRunner(ctx, nil)}
	}
	srv := &http.Server{
		Handler:           web.NewServer(wo),
		ReadHeaderTimeout: 10 * time.Second,
		BaseContext:       func(net.Listener) context.Context { return ctx },
	}
	go func() {
		<-ctx.Done()
		shutdown, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(shutdown)
	}()
	fmt.Fprintf(cmd.OutOrStdout(), "LVMS console for %s on http://%s (Ctrl+C to stop)\n", cluster, ln.Addr())
	if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("serve the console: %w", err)
	}
	return nil
}

// kubeConfig loads a kubeconfig (explicit path, $KUBECONFIG, ~/.kube/config, or in-cluster) and names the
// cluster for display: the context name, or the API server's address.
func kubeConfig(path, context string) (*rest.Config, string, error) {
	cc, cfg, err := loadKubeconfig(path, context)
	if err != nil {
		return nil, "", err
	}
	cfg.QPS, cfg.Burst = 50, 100
	name := cfg.Host
	if raw, err := cc.RawConfig(); err == nil {
		if context != "" {
			name = context
		} else if raw.CurrentContext != "" {
			name = raw.CurrentContext
		}
	}
	return cfg, name, nil
}

// kubeconfigUsage is the --kubeconfig flag's help in every command, which all find a cluster the same
// way (loadKubeconfig): the order is said once.
const kubeconfigUsage = "kubeconfig file (default: $KUBECONFIG, ~/.kube/config, or in-cluster)"

// loadKubeconfig finds the cluster as kubectl does (--kubeconfig, else $KUBECONFIG, else ~/.kube/config),
// and in a pod with none of them, in-cluster.
func loadKubeconfig(path, context string) (clientcmd.ClientConfig, *rest.Config, error) {
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	rules.ExplicitPath = path
	cc := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{CurrentContext: context})
	cfg, err := cc.ClientConfig()
	if err != nil && path != "" {
		return nil, nil, fmt.Errorf("load kubeconfig %s: %w", path, err)
	}
	if err != nil {
		return nil, nil, fmt.Errorf("find a cluster to talk to (--kubeconfig, $KUBECONFIG, ~/.kube/config or in-cluster): %w", err)
	}
	return cc, cfg, nil
}

// tokenReviewer checks callers' bearer tokens with a TokenReview made with the console's own credentials.
func tokenReviewer(cfg *rest.Config) (func(ctx context.Context, token string) error, error) {
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("token reviews: %w", err)
	}
	return func(ctx context.Context, token string) error {
		ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		tr, err := cs.AuthenticationV1().TokenReviews().Create(ctx, &authenticationv1.TokenReview{Spec: authenticationv1.TokenReviewSpec{Token: token}}, metav1.CreateOptions{})
		switch {
		case err != nil:
			return fmt.Errorf("review the token: %w", err)
		case !tr.Status.Authenticated:
			return fmt.Errorf("the API server does not accept it (%s)", tr.Status.Error)
		}
		return nil
	}, nil
}
