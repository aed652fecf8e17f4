package web

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"

	"github.com/go-chi/chi/v5"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/lvms-dev/lvms/migrate/handover"
	"github.com/lvms-dev/lvms/migrate/plan"
	"github.com/lvms-dev/lvms/migrate/wizard"
	"github.com/lvms-dev/lvms/operator/names"
	"github.com/lvms-dev/lvms/web/components"
)

// Migration enables the migration wizard (plan, preflight, apply, verify, roll back), the console's one
// write path. Every step acts with the caller's own credentials, and only after the API server says the
// caller may take it; forms are POST only, carry a CSRF token bound to the caller, and must come from the
// console's own origin.
type Migration struct {
	// Clients returns a client acting as the caller: token is the request's bearer token, "" for the
	// server's credentials (live.Pool.Client).
	Clients func(ctx context.Context, token string) (client.Client, error)
	// Runner runs the steps in the background (required).
	Runner *wizard.Runner
	// CSRFKey signs the CSRF tokens (default: random at start, so a restart invalidates open forms).
	CSRFKey []byte
}

// maxFormBytes bounds a wizard form; the real ones are a few dozen bytes.
const maxFormBytes = 16 << 10

// writeActions are the steps a form may post, and stop.
var writeActions = map[string]handover.Action{
	"preflight": handover.ActionPreflight, "apply": handover.ActionApply, "verify": handover.ActionVerify,
	"rollback": handover.ActionRollback, "stop": "",
}

func (s *server) migrationRoutes(r chi.Router) {
	r.Get("/", s.migrationIndex)
	r.Get("/{ns}/{cluster}", s.migrationPage)
	r.Post("/{ns}/{cluster}/{action}", s.migrationPost)
}

// caller returns the client acting as the request's caller.
func (s *server) caller(r *http.Request) (client.Client, error) {
	token := bearerToken(r)
	if token == "" && s.opts.RequireToken {
		return nil, errNoToken
	}
	return s.opts.Migration.Clients(r.Context(), token)
}

// migrationPageModel is the layout model of a wizard page: who the caller is comes from their snapshot
// when they may read one (the wizard does not need it).
func (s *server) migrationPageModel(r *http.Request, title string) components.Page {
	snap, _ := s.snapshot(r)
	p := s.page(r, title, "migration", snap)
	if snap == nil {
		p.At = s.opts.Migration.Runner.Now()
	}
	return p
}

func (s *server) migrationError(w http.ResponseWriter, r *http.Request, err error) {
	status, code, msg := s.classify(r, err)
	if status == http.StatusUnauthorized {
		w.Header().Set("WWW-Authenticate", `Bearer realm="lvms-console"`)
	}
	s.errorPage(w, r, status, headingFor(code), msg)
}

// migrationTargets are the LVMClusters the caller may see: cluster-wide, or in ?namespace= (default the
// product's namespace) when the caller may not list them cluster-wide.
func (s *server) migrationTargets(r *http.Request) ([]components.MigrationTarget, error) {
	c, err := s.caller(r)
	if err != nil {
		return nil, err
	}
	ns := r.URL.Query().Get("namespace")
	if ns == "" {
		ns = names.DefaultNamespace
	}
	list, err := wizard.Clusters(r.Context(), c, ns)
	if err != nil {
		return nil, err
	}
	out := make([]components.MigrationTarget, 0, len(list))
	for _, cl := range list {
		out = append(out, components.MigrationTarget{Namespace: cl.Namespace, Name: cl.Name})
	}
	return out, nil
}

// migrationIndex lists the LVMClusters the caller may see, or opens the wizard of the only one.
func (s *server) migrationIndex(w http.ResponseWriter, r *http.Request) {
	targets, err := s.migrationTargets(r)
	if err != nil {
		s.migrationError(w, r, err)
		return
	}
	if len(targets) == 1 {
		http.Redirect(w, r, string(components.MigrationURL(targets[0].Namespace, targets[0].Name)), http.StatusSeeOther)
		return
	}
	s.render(w, r, http.StatusOK, components.MigrationIndexPage(s.migrationPageModel(r, "Migration"), targets))
}

// migrationPage is the wizard of one LVMCluster; it refreshes itself while a step runs.
func (s *server) migrationPage(w http.ResponseWriter, r *http.Request) {
	ns, cluster := chi.URLParam(r, "ns"), chi.URLParam(r, "cluster")
	c, err := s.caller(r)
	if err != nil {
		s.migrationError(w, r, err)
		return
	}
	st, run, err := s.loadMigration(r, c, ns, cluster)
	if err != nil {
		s.migrationError(w, r, err)
		return
	}
	v := components.MigrationView{State: st, Run: run, CSRF: s.csrfToken(r)}
	if st.Plan != nil {
		var b strings.Builder
		if err := plan.WriteText(&b, st.Plan); err == nil {
			v.PlanText = b.String()
		}
		v.Lossy, _ = st.Plan.Counts()
	}
	p := s.migrationPageModel(r, "Migrate "+cluster)
	p.LiveURL = ""
	if v.Run != nil && v.Run.Running() {
		p.LiveURL = r.URL.RequestURI()
	}
	if isFragment(r) {
		s.render(w, r, http.StatusOK, components.MigrationContent(p, v))
		return
	}
	s.render(w, r, http.StatusOK, components.MigrationPage(p, v))
}

// loadMigration reads the last run here, then the migration's state as the caller sees it. In that order: a
// run that ends in between shows as running, so the page refreshes once more, instead of showing it ended
// beside steps computed before it did (apply still waiting for a preflight that has passed).
func (s *server) loadMigration(r *http.Request, c client.Client, ns, cluster string) (*wizard.State, *wizard.Run, error) {
	runner := s.opts.Migration.Runner
	var run *wizard.Run
	if last, ok := runner.Last(ns, cluster); ok {
		run = &last
	}
	st, err := wizard.Load(r.Context(), c, ns, cluster, runner.PreflightPassed(ns, cluster))
	return st, run, err
}

// migrationPost takes a step (or stops the running one) for the caller, then shows the wizard again.
func (s *server) migrationPost(w http.ResponseWriter, r *http.Request) {
	ns, cluster, name := chi.URLParam(r, "ns"), chi.URLParam(r, "cluster"), chi.URLParam(r, "action")
	if _, known := writeActions[name]; !known {
		s.errorPage(w, r, http.StatusNotFound, "Not found", fmt.Sprintf("The wizard has no step %q: its steps are preflight, apply, verify, rollback and stop.", name))
		return
	}
	c, ok := s.writer(w, r)
	if !ok {
		return
	}
	_, ref, err := s.takeStep(r, c, ns, cluster, name, r.PostForm.Get("acceptLossy") == "true")
	switch {
	case err != nil:
		s.migrationError(w, r, err)
	case ref != nil:
		s.errorPage(w, r, ref.status, ref.heading, ref.msg)
	default:
		http.Redirect(w, r, string(components.MigrationURL(ns, cluster)), http.StatusSeeOther)
	}
}

// refusal is why a step was not taken: the HTTP status, a code for the JSON API, a heading and a sentence.
type refusal struct {
	status        int
	code, heading string
	msg           string
}

// takeStep takes step name of the migration (or stops the running one) for the caller, whose client c is:
// only when the state allows it and the API server says the caller may. It returns the run, or why not, or
// the error reading the cluster. The wizard page's forms and its JSON API both come here.
func (s *server) takeStep(r *http.Request, c client.Client, ns, cluster, name string, acceptLossy bool) (*wizard.Run, *refusal, error) {
	runner := s.opts.Migration.Runner
	if name == "stop" {
		run, ok := runner.Last(ns, cluster)
		if !ok || !run.Running() {
			return nil, &refusal{http.StatusConflict, "NothingRunning", "Nothing to stop", "No step of this migration is running here."}, nil
		}
		missing, err := (&handover.Migrator{Client: c}).Missing(r.Context(), ns, handover.Needs(run.Action))
		if err != nil {
			return nil, nil, err
		}
		if len(missing) > 0 {
			return nil, &refusal{http.StatusForbidden, "Forbidden", "Forbidden",
				"You may not stop this step: you could not have started it (you lack " + strings.Join(missing, "; ") + ")."}, nil
		}
		runner.Stop(ns, cluster)
		run, _ = runner.Last(ns, cluster)
		return &run, nil, nil
	}
	st, err := wizard.Load(r.Context(), c, ns, cluster, runner.PreflightPassed(ns, cluster))
	if err != nil {
		return nil, nil, err
	}
	step := st.Step(writeActions[name])
	switch {
	case !step.Available:
		return nil, &refusal{http.StatusConflict, "NotAvailable", step.Title + " is not possible now", step.Why + "."}, nil
	case len(step.Missing) > 0:
		return nil, &refusal{http.StatusForbidden, "Forbidden", "Forbidden", fmt.Sprintf("You may not %s this migration: you lack %s. Ask a cluster administrator to grant these, or use an account that has them.",
			strings.ToLower(step.Title), strings.Join(step.Missing, "; "))}, nil
	}
	opts := wizard.Options{AcceptLossy: acceptLossy}
	if snap, err := s.snapshot(r); err == nil {
		opts.By = snap.User
	}
	run, err := runner.Start(c, ns, cluster, step.Action, opts)
	if err != nil {
		status := http.StatusInternalServerError
		if errors.Is(err, wizard.ErrBusy) {
			status = http.StatusConflict
		}
		return nil, &refusal{status, "NotStarted", step.Title + " did not start", err.Error() + "."}, nil
	}
	return &run, nil, nil
}

// csrfToken is the caller's CSRF token: an HMAC of their bearer token's hash (or of nothing, for the
// server's own credentials), so a token taken from one caller's page is worthless for another.
func (s *server) csrfToken(r *http.Request) string {
	sum := sha256.Sum256([]byte(bearerToken(r)))
	mac := hmac.New(sha256.New, s.csrfKey)
	mac.Write([]byte("lvms-migration-csrf\x00"))
	mac.Write(sum[:])
	return base64.RawURLEncoding.EncodeToString(mac.Sum(nil))
}

// checkWrite refuses a write that does not come from the console's own page: it must name this origin
// writer checks a write request (checkWrite) and returns a client acting as its caller; when it cannot, it
// has answered the request and ok is false.
func (s *server) writer(w http.ResponseWriter, r *http.Request) (c client.Client, ok bool) {
	if err := s.checkWrite(w, r); err != nil {
		s.errorPage(w, r, http.StatusForbidden, "Refused", err.Error())
		return nil, false
	}
	c, err := s.caller(r)
	if err != nil {
		s.migrationError(w, r, err)
		return nil, false
	}
	return c, true
}

// (Origin, and Sec-Fetch-Site when the browser sends it) and carry the caller's CSRF token.
func (s *server) checkWrite(w http.ResponseWriter, r *http.Request) error {
	origin := r.Header.Get("Origin")
	if origin == "" {
		return errors.New("This request has no Origin header: the wizard's steps are taken from its own page in a browser (a script must send Origin with this console's address)")
	}
	u, err := url.Parse(origin)
	if err != nil || u.Host == "" {
		return fmt.Errorf("The Origin header %q is not an address: the wizard's steps are taken from its own page in a browser", origin)
	}
	hosts := []string{r.Host}
	if fwd := r.Header.Get("X-Forwarded-Host"); fwd != "" {
		// Only a proxy sets it: a page on another origin cannot add it without a CORS preflight, which the
		// console never allows.
		hosts = append(hosts, strings.TrimSpace(strings.Split(fwd, ",")[0]))
	}
	if !containsFold(hosts, u.Host) {
		return fmt.Errorf("This request comes from %s, not from this console's own page (%s): the console refuses writes from other sites", origin, r.Host)
	}
	if site := r.Header.Get("Sec-Fetch-Site"); site != "" && site != "same-origin" {
		return fmt.Errorf("The browser says this request comes from a %s page, not from the console's own: refused", site)
	}
	r.Body = http.MaxBytesReader(w, r.Body, maxFormBytes)
	if err := r.ParseForm(); err != nil {
		return fmt.Errorf("The form could not be read: %v", err)
	}
	got := r.PostForm.Get("csrf")
	if got == "" || !hmac.Equal([]byte(got), []byte(s.csrfToken(r))) {
		return errors.New("The form's CSRF token is missing or not yours (the page may be from before the console restarted): reload the page and try again")
	}
	return nil
}

func containsFold(list []string, s string) bool {
	for _, x := range list {
		if strings.EqualFold(x, s) {
			return true
		}
	}
	return false
}

// newCSRFKey is a random key for a server started without one.
func newCSRFKey() []byte {
	k := make([]byte, 32)
	_, _ = rand.Read(k) // crypto/rand.Read never fails (Go 1.24+)
	return k
}
