package web

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"net/http"
	"runtime/debug"
	"strings"
	"time"

	"github.com/go-chi/chi/v5"
	"github.com/go-chi/chi/v5/middleware"
	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"github.com/lvms-dev/lvms/console"
	"github.com/lvms-dev/lvms/hostcheck"
	"github.com/lvms-dev/lvms/web/plugin"
)

// SourceFor returns the snapshot source that acts as the caller: token is the request's bearer token, ""
// when it has none (the server's own credentials are used then, unless Options.RequireToken).
type SourceFor func(ctx context.Context, token string) (console.Source, error)

// StaticSources serves one source to every caller, whatever its token (tests, support bundles).
func StaticSources(src console.Source) SourceFor {
	return func(context.Context, string) (console.Source, error) { return src, nil }
}

// Options configure the server.
type Options struct {
	// Sources gives every request its source (required). Use live.Pool.For for a cluster.
	Sources SourceFor
	// RequireToken refuses requests without a bearer token with 401, so that, in a cluster, no request falls
	// back to the server's own (service account) credentials. `lvms console` on 127.0.0.1 leaves it off and
	// uses the kubeconfig.
	RequireToken bool
	// LocalOnly answers only requests addressed to localhost, 127.0.0.1 or [::1] (any port): a web page
	// elsewhere cannot reach a console that reads with the kubeconfig's credentials by pointing its own host
	// name at 127.0.0.1 (DNS rebinding). `lvms console` sets it unless --require-token.
	LocalOnly bool
	// Logger receives request errors and the request log (default: discard).
	Logger *slog.Logger
	// Bundle, when set, is the support bundle the console shows (Sources returns its source): every page
	// carries a read-only banner with the bundle's time, nothing refreshes, and /findings lists the
	// analyzers' findings.
	Bundle *Bundle
	// Migration, when set (and no Bundle), serves the migration wizard under /migration.
	Migration *Migration
	// Cluster names the cluster in the header of a page shown without a snapshot (an unknown path, a
	// cluster that cannot be read): the kubeconfig context, as the snapshot's pages name it.
	Cluster string
	// Server is the API server's URL, named when the cluster cannot be read ("" when unknown, or in a
	// cluster, where it is the Service).
	Server string
}

// server holds the handlers' dependencies.
type server struct {
	opts    Options
	log     *slog.Logger
	csrfKey []byte
}

// NewServer returns the console's HTTP handler: pages, /api/v1, /assets, /plugin and /healthz.
func NewServer(opts Options) http.Handler {
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	if opts.Sources == nil {
		opts.Sources = func(context.Context, string) (console.Source, error) {
			return nil, errors.New("web.Options.Sources is not set")
		}
	}
	if opts.Bundle != nil {
		opts.Migration = nil // a bundle is not a cluster to write to
	}
	s := &server{opts: opts, log: opts.Logger}
	if m := opts.Migration; m != nil {
		s.csrfKey = m.CSRFKey
		if len(s.csrfKey) == 0 {
			s.csrfKey = newCSRFKey()
		}
	}
	r := chi.NewRouter()
	r.Use(middleware.RequestID, s.recoverer, s.logRequests, securityHeaders, middleware.GetHead)
	if opts.LocalOnly {
		r.Use(localHostOnly)
	}
	static, _ := fs.Sub(assets, "assets") // "assets" is embedded: Sub cannot fail
	r.Handle("/assets/*", http.StripPrefix("/assets/", validAssetPath(cacheFor(time.Hour, http.FileServer(http.FS(static))))))
	r.Get("/healthz", func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "ok\n") })
	r.Mount("/plugin", plugin.Handler())
	r.Route("/api/v1", s.apiRoutes)
	r.Get("/", s.overviewPage)
	r.Get("/nodes/{node}", s.nodePage)
	r.Get("/nodes/{node}/devices/*", s.devicePage)
	r.Get("/deviceclasses", s.deviceClassesPage)
	r.Get("/volumes", s.volumesPage)
	r.Route("/claims/{ns}/{claim}/move", s.moveRoutes)
	r.Get("/events", s.eventsPage)
	r.Get("/findings", s.findingsPage)
	if opts.Migration != nil {
		r.Route("/migration", s.migrationRoutes)
	}
	r.NotFound(func(w http.ResponseWriter, r *http.Request) {
		s.errorPage(w, r, http.StatusNotFound, "Page not found", "There is no page at "+r.URL.Path+".")
	})
	r.MethodNotAllowed(func(w http.ResponseWriter, r *http.Request) {
		s.errorPage(w, r, http.StatusMethodNotAllowed, "Method not allowed", "Only GET is served here: the console is read-only, except for the migration wizard's steps and volume moves, which are posted from their pages.")
	})
	return r
}

// bearerToken returns the token of an "Authorization: Bearer" header, or "".
func bearerToken(r *http.Request) string {
	h := r.Header.Get("Authorization")
	scheme, token, ok := strings.Cut(h, " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return ""
	}
	return strings.TrimSpace(token)
}

// errNoToken is returned when RequireToken is set and the request has no bearer token.
var errNoToken = &console.AccessError{Unauthorized: true, Err: errors.New("no bearer token")}

// snapshot reads the state as the caller.
func (s *server) snapshot(r *http.Request) (*console.Snapshot, error) {
	token := bearerToken(r)
	if token == "" && s.opts.RequireToken {
		return nil, errNoToken
	}
	src, err := s.opts.Sources(r.Context(), token)
	if err != nil {
		return nil, fmt.Errorf("source for the caller: %w", err)
	}
	snap, err := src.Snapshot(r.Context())
	if err != nil {
		return nil, err
	}
	return snap, nil
}

// errNotInstalled is what the API answers on a cluster without the LVMS CRDs.
var errNotInstalled = errors.New("LVMS is not installed: the cluster does not serve the lvm.topolvm.io APIs")

// classify turns an error into an HTTP status, a code and a message for the caller. Unexpected errors get
// a generic message; the detail goes to the log only.
func (s *server) classify(r *http.Request, err error) (status int, code, message string) {
	var nf *console.NotFoundError
	var ae *console.AccessError
	var br *badRequestError
	switch {
	case errors.As(err, &br):
		return http.StatusBadRequest, "BadRequest", strings.ToUpper(br.msg[:1]) + br.msg[1:] + "."
	case errors.As(err, &nf):
		return http.StatusNotFound, "NotFound", strings.ToUpper(nf.Error()[:1]) + nf.Error()[1:] + "."
	case errors.Is(err, errNoToken):
		return http.StatusUnauthorized, "Unauthorized", "This console needs a bearer token (Authorization: Bearer …) to act as you; log in through the cluster's console or proxy."
	case errors.As(err, &ae) && ae.Unauthorized:
		return http.StatusUnauthorized, "Unauthorized", ae.Error()
	case errors.As(err, &ae):
		return http.StatusForbidden, "Forbidden", strings.ToUpper(ae.Error()[:1]) + ae.Error()[1:] + "."
	case apierrors.IsUnauthorized(err):
		return http.StatusUnauthorized, "Unauthorized", "The API server rejected the credentials: " + err.Error()
	case apierrors.IsForbidden(err):
		return http.StatusForbidden, "Forbidden", "The API server refused: " + err.Error() + "."
	case errors.Is(err, errNotInstalled):
		return http.StatusNotFound, "NotInstalled", err.Error()
	}
	s.log.ErrorContext(r.Context(), "Reading the cluster failed", "path", r.URL.Path, "request", middleware.GetReqID(r.Context()), "error", err)
	at := ""
	if s.opts.Server != "" {
		at = " at " + s.opts.Server
	}
	return http.StatusBadGateway, "ClusterUnavailable", "The console could not read the cluster" + at + ". The server log has the details; check that the API server is reachable and retry."
}

// localHostOnly refuses requests whose Host is not a loopback name with 421 Misdirected Request.
func localHostOnly(next http.Handler) http.Handler {
	hosts := hostcheck.Loopback()
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if err := hosts.Check(r.Host); err != nil {
			http.Error(w, fmt.Sprintf("This console answers only requests to %s, not %q: it reads the cluster with your kubeconfig's credentials. "+
				"Open it through localhost, or serve it with --require-token.", hosts, r.Host), http.StatusMisdirectedRequest)
			return
		}
		next.ServeHTTP(w, r)
	})
}

// securityHeaders forbids framing, inline scripts and styles, and content sniffing.
func securityHeaders(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h.Set("Content-Security-Policy", "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; "+
			"connect-src 'self'; frame-ancestors 'none'; base-uri 'self'; form-action 'self'")
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("X-Frame-Options", "DENY")
		// same-origin, not no-referrer: with no-referrer a browser sends "Origin: null" on the wizard's own
		// form posts, and the same-origin check needs the real origin. Other sites still get nothing.
		h.Set("Referrer-Policy", "same-origin")
		next.ServeHTTP(w, r)
	})
}

// validAssetPath answers 404 for a path io/fs cannot name (invalid UTF-8, "..", empty elements), which the
// file server would otherwise report as a 500.
func validAssetPath(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if p := strings.TrimPrefix(r.URL.Path, "/"); p != "" && !fs.ValidPath(strings.TrimSuffix(p, "/")) {
			http.NotFound(w, r)
			return
		}
		next.ServeHTTP(w, r)
	})
}

func cacheFor(d time.Duration, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Cache-Control", fmt.Sprintf("public, max-age=%d", int(d.Seconds())))
		next.ServeHTTP(w, r)
	})
}

// recoverer answers 500 when a handler panics and logs the stack; the server keeps running.
func (s *server) recoverer(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		defer func() {
			if v := recover(); v != nil {
				if v == http.ErrAbortHandler {
					panic(v)
				}
				s.log.ErrorContext(r.Context(), "Handler panicked", "path", r.URL.Path, "panic", v, "stack", string(debug.Stack()))
				http.Error(w, "internal error: the server log has the details", http.StatusInternalServerError)
			}
		}()
		next.ServeHTTP(w, r)
	})
}

// logRequests logs every request at debug level with its status and duration.
func (s *server) logRequests(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		ww := middleware.NewWrapResponseWriter(w, r.ProtoMajor)
		next.ServeHTTP(ww, r)
		s.log.DebugContext(r.Context(), "Request", "method", r.Method, "path", r.URL.Path, "status", ww.Status(),
			"duration", time.Since(start), "request", middleware.GetReqID(r.Context()))
	})
}
