package web

import (
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/go-chi/chi/v5"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/lvms-dev/lvms/console"
	"github.com/lvms-dev/lvms/operator/move"
	"github.com/lvms-dev/lvms/web/components"
)

// Moving a claim's volume to another node (package operator/move): the page shows the claim's move and,
// when the console acts for its callers (Options.Migration: the same caller clients and CSRF protection as
// the wizard), forms that request, confirm or abort a move with the caller's own credentials. Without it
// the page shows the `lvms move` command line to run instead.
//
//	GET  /claims/{ns}/{claim}/move            the move page
//	POST /claims/{ns}/{claim}/move/{action}   request (node), confirm (id) or abort; then 303 to the page

// moveActions are the actions a move form may post.
var moveActions = map[string]bool{"request": true, "confirm": true, "abort": true}

// movesEnabled reports whether the console may act for its callers: a live cluster with caller clients.
func (s *server) movesEnabled() bool { return s.opts.Migration != nil && s.opts.Bundle == nil }

func (s *server) moveRoutes(r chi.Router) {
	r.Get("/", s.movePage)
	if !s.movesEnabled() {
		r.Post("/{action}", func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Allow", "GET, HEAD")
			s.errorPage(w, r, http.StatusMethodNotAllowed, "Method not allowed",
				"This console does not act for its callers, so it cannot move a volume: run the lvms move command its move page shows.")
		})
		return
	}
	r.Post("/{action}", s.movePost)
}

// claimVolume finds the volume of claim ns/name in the snapshot. During and after a move two
// PersistentVolumes name the claim (the source one is kept, Released, until the move is confirmed): the
// Bound one is the claim's volume.
func claimVolume(snap *console.Snapshot, ns, name string) (console.VolumeView, error) {
	var found *console.VolumeView
	vols := console.Volumes(snap)
	for i := range vols {
		v := &vols[i]
		if v.ClaimNamespace != ns || v.ClaimName != name {
			continue
		}
		if found == nil || (v.PVPhase == "Bound" && found.PVPhase != "Bound") {
			found = v
		}
	}
	if found == nil {
		return console.VolumeView{}, &console.NotFoundError{Kind: "LVMS volume of claim", Name: ns + "/" + name}
	}
	return *found, nil
}

// movePage shows a claim's move; it refreshes itself while a move runs.
func (s *server) movePage(w http.ResponseWriter, r *http.Request) {
	snap := s.pageSnapshot(w, r)
	if snap == nil {
		return
	}
	ns, name := chi.URLParam(r, "ns"), chi.URLParam(r, "claim")
	vol, err := claimVolume(snap, ns, name)
	if err != nil {
		status, code, msg := s.classify(r, err)
		s.errorPageOf(w, r, snap, status, headingFor(code), msg)
		return
	}
	v := components.MoveView{Volume: vol, Enabled: s.movesEnabled(), Targets: components.MoveTargetsFor(console.MoveTargets(snap), vol)}
	if v.Enabled {
		v.CSRF = s.csrfToken(r)
	}
	p := s.page(r, "Move "+ns+"/"+name, "volumes", snap)
	if vol.Move == nil || !vol.Move.Active() {
		// Nothing changes by itself: no refresh, so the node picked in the form stays picked.
		p.LiveURL = ""
	}
	if isFragment(r) {
		s.render(w, r, http.StatusOK, components.MoveContent(p, v))
		return
	}
	s.render(w, r, http.StatusOK, components.MovePage(p, v))
}

// movePost requests, confirms or aborts a claim's move as the caller, then shows the move page. What
// move.Request, Confirm and Abort answer is shown to the caller as it is.
func (s *server) movePost(w http.ResponseWriter, r *http.Request) {
	ns, name, action := chi.URLParam(r, "ns"), chi.URLParam(r, "claim"), chi.URLParam(r, "action")
	if !moveActions[action] {
		s.errorPage(w, r, http.StatusNotFound, "Not found", fmt.Sprintf("A move has no action %q: its actions are request, confirm and abort.", action))
		return
	}
	c, ok := s.writer(w, r)
	if !ok {
		return
	}
	key := types.NamespacedName{Namespace: ns, Name: name}
	node := r.PostForm.Get("node")
	var err error
	switch action {
	case "request":
		err = move.Request(r.Context(), c, key, node)
	case "confirm":
		err = move.Confirm(r.Context(), c, key, r.PostForm.Get("id"))
	case "abort":
		err = move.Abort(r.Context(), c, key)
	}
	if err != nil {
		status, heading := moveErrorStatus(action, node, err)
		s.errorPage(w, r, status, heading, err.Error())
		return
	}
	http.Redirect(w, r, string(components.MoveURL(ns, name)), http.StatusSeeOther)
}

// moveErrorStatus is the HTTP status and heading of an error from move.Request, Confirm or Abort.
func moveErrorStatus(action, node string, err error) (int, string) {
	var status apierrors.APIStatus
	switch {
	case action == "request" && len(validation.IsDNS1123Subdomain(node)) > 0:
		return http.StatusBadRequest, "Not a node name"
	case apierrors.IsForbidden(err) || strings.HasPrefix(err.Error(), "you may not"):
		return http.StatusForbidden, "Forbidden"
	case strings.HasSuffix(err.Error(), "does not exist"):
		return http.StatusNotFound, "Not found"
	case apierrors.IsUnauthorized(err):
		return http.StatusUnauthorized, "Not logged in"
	case errors.As(err, &status) && !apierrors.IsConflict(err):
		return http.StatusBadGateway, "The cluster could not be written"
	}
	return http.StatusConflict, "The move was refused"
}
