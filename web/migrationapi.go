package web

import (
	"crypto/hmac"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/go-chi/chi/v5"

	"github.com/lvms-dev/lvms/migrate/plan"
	"github.com/lvms-dev/lvms/migrate/wizard"
	"github.com/lvms-dev/lvms/web/components"
)

// The wizard's JSON API, for the OpenShift console plugin's page:
//
//	GET  /api/v1/migration                        [{namespace, name}] the LVMClusters the caller sees
//	GET  /api/v1/migration/{ns}/{cluster}         migrationJSON
//	POST /api/v1/migration/{ns}/{cluster}/{step}  {"acceptLossy": bool} -> 202 runJSON
//
// A POST must carry the caller's CSRF token (from the GET) in the X-LVMS-CSRF header: a page on another
// site cannot send that header without a CORS preflight, which this server never allows. A browser's
// Sec-Fetch-Site, when sent, must say same-origin.
const csrfHeader = "X-LVMS-CSRF"

type migrationJSON struct {
	Namespace   string     `json:"namespace"`
	Cluster     string     `json:"cluster"`
	ClusterGone bool       `json:"clusterGone"`
	Done        bool       `json:"done"`
	Step        string     `json:"step,omitempty"`
	PlanText    string     `json:"planText,omitempty"`
	PlanError   string     `json:"planError,omitempty"`
	Lossy       int        `json:"lossy"`
	Nodes       []nodeJSON `json:"nodes"`
	Steps       []stepJSON `json:"steps"`
	Run         *runJSON   `json:"run,omitempty"`
	CSRF        string     `json:"csrf"`
	Sets        []string   `json:"sets,omitempty"`
}

type nodeJSON struct {
	Name  string `json:"name"`
	State string `json:"state"` // handed-over, in-progress, pending
}

type stepJSON struct {
	Action    string   `json:"action"`
	Title     string   `json:"title"`
	Available bool     `json:"available"`
	Enabled   bool     `json:"enabled"`
	Why       string   `json:"why"`
	Missing   []string `json:"missing"`
}

type runJSON struct {
	Action   string         `json:"action"`
	State    string         `json:"state"` // running, passed, failed
	By       string         `json:"by,omitempty"`
	Started  time.Time      `json:"started"`
	Error    string         `json:"error,omitempty"`
	Events   []progressJSON `json:"events"`
	Checks   []checkJSON    `json:"checks,omitempty"`
	Verify   *verifyJSON    `json:"verify,omitempty"`
	Progress *progressJSON  `json:"latest,omitempty"`
}

type progressJSON struct {
	Step    string `json:"step"`
	Node    string `json:"node,omitempty"`
	Done    int    `json:"done"`
	Total   int    `json:"total"`
	Message string `json:"message"`
}

type checkJSON struct {
	Name    string   `json:"name"`
	Verdict string   `json:"verdict"`
	Reason  string   `json:"reason"`
	Fix     string   `json:"fix,omitempty"`
	Details []string `json:"details,omitempty"`
}

type verifyJSON struct {
	Differences []string `json:"differences"`
}

func (s *server) migrationAPIRoutes(r chi.Router) {
	r.Get("/", s.migrationListAPI)
	r.Get("/{ns}/{cluster}", s.migrationAPI)
	r.Post("/{ns}/{cluster}/{action}", s.migrationPostAPI)
}

func (s *server) apiFail(w http.ResponseWriter, r *http.Request, status int, code, msg string) {
	if status == http.StatusUnauthorized {
		w.Header().Set("WWW-Authenticate", `Bearer realm="lvms-console"`)
	}
	writeJSON(w, status, apiError{apiErrorBody{status, code, msg}})
}

func (s *server) apiFailErr(w http.ResponseWriter, r *http.Request, err error) {
	status, code, msg := s.classify(r, err)
	s.apiFail(w, r, status, code, msg)
}

func (s *server) migrationListAPI(w http.ResponseWriter, r *http.Request) {
	targets, err := s.migrationTargets(r)
	if err != nil {
		s.apiFailErr(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, targets)
}

func (s *server) migrationAPI(w http.ResponseWriter, r *http.Request) {
	ns, cluster := chi.URLParam(r, "ns"), chi.URLParam(r, "cluster")
	c, err := s.caller(r)
	if err != nil {
		s.apiFailErr(w, r, err)
		return
	}
	st, run, err := s.loadMigration(r, c, ns, cluster)
	if err != nil {
		s.apiFailErr(w, r, err)
		return
	}
	v := components.MigrationView{State: st, Run: run}
	out := migrationJSON{Namespace: ns, Cluster: cluster, ClusterGone: st.ClusterGone, Done: st.Done(), PlanError: st.PlanError,
		CSRF: s.csrfToken(r), Nodes: []nodeJSON{}, Steps: []stepJSON{}}
	if st.Record != nil {
		out.Step, out.Sets = string(st.Record.Step), st.Record.Sets
	}
	if st.Plan != nil {
		var b strings.Builder
		if err := plan.WriteText(&b, st.Plan); err == nil {
			out.PlanText = b.String()
		}
		out.Lossy, _ = st.Plan.Counts()
	}
	for _, n := range st.Nodes {
		out.Nodes = append(out.Nodes, nodeJSON{Name: n.Name, State: components.NodeMigrationState(v, n)})
	}
	for _, st := range st.Steps {
		out.Steps = append(out.Steps, stepJSON{Action: string(st.Action), Title: st.Title, Available: st.Available,
			Enabled: st.Enabled(), Why: st.Why, Missing: nonNil(st.Missing)})
	}
	if v.Run != nil {
		out.Run = runView(v.Run)
	}
	writeJSON(w, http.StatusOK, out)
}

func runView(run *wizard.Run) *runJSON {
	out := &runJSON{Action: string(run.Action), State: components.RunState(run), By: run.By, Started: run.Started, Error: run.Err,
		Events: []progressJSON{}}
	for _, e := range run.Events {
		out.Events = append(out.Events, progressJSON(e))
	}
	if len(out.Events) > 0 {
		out.Progress = &out.Events[len(out.Events)-1]
	}
	for _, c := range run.Checks {
		out.Checks = append(out.Checks, checkJSON{Name: c.Name, Verdict: string(c.Verdict), Reason: c.Reason, Fix: c.Fix, Details: c.Details})
	}
	if run.Verification != nil {
		out.Verify = &verifyJSON{Differences: nonNil(run.Verification.Differences)}
	}
	return out
}

// migrationPostAPI takes a step for the caller, as the wizard page's forms do.
func (s *server) migrationPostAPI(w http.ResponseWriter, r *http.Request) {
	ns, cluster, name := chi.URLParam(r, "ns"), chi.URLParam(r, "cluster"), chi.URLParam(r, "action")
	if _, known := writeActions[name]; !known {
		s.apiFail(w, r, http.StatusNotFound, "NotFound", fmt.Sprintf("the wizard has no step %q: its steps are preflight, apply, verify, rollback and stop", name))
		return
	}
	if site := r.Header.Get("Sec-Fetch-Site"); site != "" && site != "same-origin" {
		s.apiFail(w, r, http.StatusForbidden, "Refused", fmt.Sprintf("the browser says this request comes from a %s page, not from the console's own: refused", site))
		return
	}
	if got := r.Header.Get(csrfHeader); got == "" || !hmac.Equal([]byte(got), []byte(s.csrfToken(r))) {
		s.apiFail(w, r, http.StatusForbidden, "Refused", "the "+csrfHeader+" header is missing or not yours: take it from GET "+r.URL.Path[:strings.LastIndex(r.URL.Path, "/")])
		return
	}
	var body struct {
		AcceptLossy bool `json:"acceptLossy"`
	}
	if r.ContentLength != 0 {
		if err := json.NewDecoder(http.MaxBytesReader(w, r.Body, maxFormBytes)).Decode(&body); err != nil && !errors.Is(err, io.EOF) {
			s.apiFail(w, r, http.StatusBadRequest, "BadRequest", "the body is not {\"acceptLossy\": true|false}: "+err.Error())
			return
		}
	}
	c, err := s.caller(r)
	if err != nil {
		s.apiFailErr(w, r, err)
		return
	}
	run, ref, err := s.takeStep(r, c, ns, cluster, name, body.AcceptLossy)
	switch {
	case err != nil:
		s.apiFailErr(w, r, err)
	case ref != nil:
		s.apiFail(w, r, ref.status, ref.code, ref.msg)
	default:
		writeJSON(w, http.StatusAccepted, runView(run))
	}
}
