package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	"github.com/lvms-dev/lvms/console/live"
	"github.com/lvms-dev/lvms/migrate/wizard"
	"github.com/lvms-dev/lvms/web"
	"github.com/lvms-dev/lvms/web/tlscert"
)

// consoleServiceName is the Service in front of the in-cluster console (deploy/operator/service.yaml).
const consoleServiceName = "lvms-console"

// inClusterConsole serves the web console, its JSON API and the OpenShift console plugin's assets over
// HTTPS from the operator. Every request must carry the caller's bearer token (the OpenShift console's
// plugin proxy adds the user's) and reads the cluster as that caller; the operator's own credentials only
// review tokens. The migration wizard's writes, too, are made with the caller's token.
func inClusterConsole(cfg *rest.Config, addr, certDir, namespace string, logger logr.Logger) (manager.Runnable, error) {
	review, err := tokenReviewer(cfg)
	if err != nil {
		return nil, err
	}
	svc := consoleServiceName + "." + namespace + ".svc"
	certs := &tlscert.Source{Dir: certDir, Host: svc, DNSNames: []string{consoleServiceName, svc, svc + ".cluster.local"}}
	return manager.RunnableFunc(func(ctx context.Context) error {
		ln, err := net.Listen("tcp", addr)
		if err != nil {
			return fmt.Errorf("console: listen on %s: %w", addr, err)
		}
		pool := live.NewPool(ctx, cfg, live.Options{Cluster: "in-cluster", TokenReview: review}, 0)
		srv := &http.Server{
			Handler: web.NewServer(web.Options{RequireToken: true, Logger: slog.New(logr.ToSlogHandler(logger)),
				Sources: pool.For, Migration: &web.Migration{Clients: pool.Client, Runner: wizard.NewRunner(ctx, nil)}}),
			TLSConfig:         certs.Config(),
			ReadHeaderTimeout: 10 * time.Second,
			BaseContext:       func(net.Listener) context.Context { return ctx },
		}
		go func() {
			<-ctx.Done()
			shutdown, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			_ = srv.Shutdown(shutdown)
		}()
		logger.Info("Serving the console over HTTPS", "address", ln.Addr().String(), "certDir", certDir)
		if err := srv.ServeTLS(ln, "", ""); err != nil && !errors.Is(err, http.ErrServerClosed) {
			return fmt.Errorf("console: %w", err)
		}
		return nil
	}), nil
}

// addInClusterConsole adds the console to the operator's manager unless addr is "0". It runs on every
// replica, not only the leader: it reads, and writes only as its callers.
func addInClusterConsole(mgr ctrl.Manager, cfg *rest.Config, o operatorOptions, logger logr.Logger) error {
	if o.consoleAddr == "0" {
		return nil
	}
	r, err := inClusterConsole(cfg, o.consoleAddr, o.consoleCertDir, o.namespace, logger)
	if err != nil {
		return err
	}
	if err := mgr.Add(nonLeader{r}); err != nil {
		return fmt.Errorf("add the console: %w", err)
	}
	return nil
}

// nonLeader runs a Runnable without waiting for leader election.
type nonLeader struct{ manager.Runnable }

func (nonLeader) NeedLeaderElection() bool { return false }
