package web

import (
	"net/http"
	"time"

	"github.com/lvms-dev/lvms/diagnostics/analyze"
	"github.com/lvms-dev/lvms/web/components"
)

// Bundle is a support bundle the console shows offline (lvms console --bundle).
type Bundle struct {
	// Name is the bundle's file or directory.
	Name string
	// At is when it was collected.
	At time.Time
	// Findings are the analyzers' findings, worst first.
	Findings []analyze.Finding
}

// findingsPage lists the analyzers' findings of the bundle.
func (s *server) findingsPage(w http.ResponseWriter, r *http.Request) {
	if s.opts.Bundle == nil {
		s.errorPage(w, r, http.StatusNotFound, "No findings here",
			"Findings are computed from support bundles: collect one with 'lvms bundle' and open it with 'lvms console --bundle FILE'.")
		return
	}
	snap := s.pageSnapshot(w, r)
	if snap == nil {
		return
	}
	b := s.opts.Bundle
	s.render(w, r, http.StatusOK, components.FindingsPage(s.page(r, "Findings", "findings", snap), b.Findings, analyze.Summarize(b.Findings)))
}

// findingsAPI serves the findings as analysis.json does.
func (s *server) findingsAPI(w http.ResponseWriter, _ *http.Request) {
	if s.opts.Bundle == nil {
		writeJSON(w, http.StatusNotFound, apiError{apiErrorBody{http.StatusNotFound, "NotFound", "findings are served for support bundles only"}})
		return
	}
	fs := s.opts.Bundle.Findings
	if fs == nil {
		fs = []analyze.Finding{}
	}
	writeJSON(w, http.StatusOK, analyze.Document{Format: 1, Summary: analyze.Summarize(fs), Findings: fs})
}
