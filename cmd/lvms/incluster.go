package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	"github.com/lvms-dev/lvms/console"
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
			return fmt.Errorf("console: cannot serve: %w", err)
		}
		const cluster = "in-cluster" // how the pages name the cluster they run in
		pool := live.NewPool(ctx, cfg, live.Options{Cluster: cluster, TokenReview: review}, 0)
		srv := &http.Server{
			Handler: reviewFirst(pool, web.Options{RequireToken: true, Cluster: cluster, Logger: slog.New(logr.ToSlogHandler(logger)),
				Migration: &web.Migration{Clients: pool.Client, Runner: wizard.NewRunner(ctx, nil)}}),
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

// reviewFirst serves the console (opts with Sources from pool) after reviewing the request's bearer token,
// so that a client over its limit of new tokens gets 429 Too Many Requests before the handler runs; the
// handler then reads with the source found here instead of asking the pool again.
//
// The client is the request's remote IP, not X-Forwarded-For, which anyone reaching the Service could set.
// Behind the OpenShift console's plugin proxy every user's requests come from the console's pod (through
// kubectl port-forward, from 127.0.0.1), so its users share one limit for tokens the pool has not seen; a
// user's later requests, with an accepted token, are not limited.
func reviewFirst(pool *live.Pool, opts web.Options) http.Handler {
	opts.Sources = func(ctx context.Context, token string) (console.Source, error) {
		if f, ok := ctx.Value(reviewedKey{}).(*reviewed); ok && f.token == token {
			return f.src, f.err
		}
		return pool.For(ctx, token)
	}
	next := web.NewServer(opts)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		token := bearerToken(r)
		if token == "" {
			next.ServeHTTP(w, r)
			return
		}
		ctx := live.WithClient(r.Context(), clientIP(r))
		src, err := pool.For(ctx, token)
		var limited *live.TooManyNewTokensError
		if errors.As(err, &limited) {
			tooManyRequests(w, r, limited)
			return
		}
		// A refusal or a failed review goes to the handler too, which answers it in its own form.
		next.ServeHTTP(w, r.WithContext(context.WithValue(ctx, reviewedKey{}, &reviewed{token: token, src: src, err: err})))
	})
}

type reviewedKey struct{}

// reviewed is reviewFirst's answer for a request, so that a failed review is not made twice.
type reviewed struct {
	token string
	src   console.Source
	err   error
}

// bearerToken reads the request's token as the web package does.
func bearerToken(r *http.Request) string {
	scheme, token, ok := strings.Cut(r.Header.Get("Authorization"), " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return ""
	}
	return strings.TrimSpace(token)
}

// clientIP is the host of the request's remote address.
func clientIP(r *http.Request) string {
	if host, _, err := net.SplitHostPort(r.RemoteAddr); err == nil {
		return host
	}
	return r.RemoteAddr
}

// tooManyRequests answers 429 with Retry-After: as JSON on /api/v1 (the shape of the API's other errors),
// as text elsewhere.
func tooManyRequests(w http.ResponseWriter, r *http.Request, e *live.TooManyNewTokensError) {
	msg := strings.ToUpper(e.Error()[:1]) + e.Error()[1:] + "."
	w.Header().Set("Retry-After", strconv.Itoa(live.RetryAfterSeconds(e.RetryAfter)))
	w.Header().Set("Cache-Control", "no-store")
	if !strings.HasPrefix(r.URL.Path, "/api/") {
		http.Error(w, msg, http.StatusTooManyRequests)
		return
	}
	body, _ := json.Marshal(map[string]any{"error": map[string]any{"status": http.StatusTooManyRequests, "code": "TooManyRequests", "message": msg}})
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusTooManyRequests)
	_, _ = w.Write(append(body, '\n'))
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
