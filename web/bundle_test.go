package web_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	lvmv2 "github.com/lvms-dev/lvms/api/lvm/v2alpha1"
	"github.com/lvms-dev/lvms/diagnostics/analyze"
	"github.com/lvms-dev/lvms/diagnostics/bundle"
	"github.com/lvms-dev/lvms/diagnostics/bundletest"
	"github.com/lvms-dev/lvms/web"
)

// bundleServer serves a hand-made bundle whose worker-b is Degraded, as `lvms console --bundle` does.
func bundleServer(t *testing.T) http.Handler {
	t.Helper()
	s := bundletest.Healthy()
	n := bundletest.Find[*lvmv2.LVMNode](s, bundletest.NodeB)
	n.Status.State, n.Status.Message = lvmv2.StateDegraded, "thin pool cannot be created"
	b := s.Bundle(t)
	return web.NewServer(web.Options{Sources: web.StaticSources(bundle.NewSource(b)),
		Bundle: &web.Bundle{Name: "cluster.tar.gz", At: b.Manifest.Started, Findings: analyze.Run(b)}})
}

func TestBundle_EveryPageIsMarkedReadOnlyAndStatic(t *testing.T) {
	h := bundleServer(t)
	for _, path := range []string{"/", "/nodes/worker-b", "/nodes/worker-a/devices/sdb", "/deviceclasses", "/volumes", "/events", "/findings"} {
		rec, doc := get(t, h, path)
		if rec.Code != http.StatusOK {
			t.Errorf("%s: status %d", path, rec.Code)
			continue
		}
		banner := doc.Find(testid("bundle-banner")).Text()
		if !strings.Contains(banner, "cluster.tar.gz") || !strings.Contains(banner, "2026-11-22 10:00:00Z") || !strings.Contains(banner, "not the live cluster") {
			t.Errorf("%s: banner %q", path, banner)
		}
		if doc.Find("[hx-get]").Length() != 0 {
			t.Errorf("%s refreshes itself, but a bundle never changes", path)
		}
		if doc.Find(`nav a[href="/findings"]`).Length() != 1 {
			t.Errorf("%s has no link to the findings", path)
		}
	}
}

func TestBundle_FindingsPage(t *testing.T) {
	h := bundleServer(t)
	_, doc := get(t, h, "/findings")
	row := doc.Find(testid("finding") + `[data-check="NodeNotReady"][data-severity="fail"]`)
	if row.Length() != 1 || !strings.Contains(row.Text(), "worker-b is Degraded") || row.Find(`a[href="/nodes/worker-b"]`).Length() != 1 {
		t.Errorf("NodeNotReady row = %q", row.Text())
	}
	if first, _ := doc.Find(testid("finding")).First().Attr("data-severity"); first != "fail" {
		t.Errorf("first finding is %s, want the failures first", first)
	}
	if s := doc.Find(testid("findings-summary")).Text(); !strings.Contains(s, "1 fail") {
		t.Errorf("summary %q", s)
	}
	rec, _ := get(t, h, "/api/v1/findings")
	var d analyze.Document
	if err := json.Unmarshal(rec.Body.Bytes(), &d); err != nil || d.Summary.Fail != 1 || len(d.Findings) == 0 {
		t.Errorf("findings API (%v): %s", err, rec.Body)
	}
}

func TestFindings_OnlyForBundles(t *testing.T) {
	rec, doc := get(t, preparedServer(), "/findings")
	if rec.Code != http.StatusNotFound || !strings.Contains(doc.Text(), "lvms console --bundle") {
		t.Errorf("live /findings: %d %q", rec.Code, doc.Find("main").Text())
	}
	if _, doc := get(t, preparedServer(), "/"); doc.Find(testid("bundle-banner")).Length() != 0 || doc.Find("[hx-get]").Length() == 0 {
		t.Error("a live page has the bundle banner or does not refresh")
	}
	if rec, _ := get(t, preparedServer(), "/api/v1/findings"); rec.Code != http.StatusNotFound {
		t.Errorf("live findings API: %d", rec.Code)
	}
}
