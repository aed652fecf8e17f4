package bundletest

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"

	"github.com/lvms-dev/lvms/console"
	"github.com/lvms-dev/lvms/web"
	"github.com/lvms-dev/lvms/web/components"
)

// Pages lists the console's pages for a snapshot: overview, lists, every node (and its diff view) and every
// device of every node.
func Pages(snap *console.Snapshot) []string {
	paths := []string{"/", "/deviceclasses", "/volumes", "/events"}
	for _, n := range console.BuildOverview(snap).Nodes {
		paths = append(paths, string(components.NodeURL(n.Name)), string(components.NodeDiffURL(n.Name)))
		v, err := console.Node(snap, n.Name)
		if err != nil {
			continue
		}
		for _, g := range v.VolumeGroups {
			for _, d := range g.Devices {
				paths = append(paths, string(components.DeviceURL(n.Name, d.KName)))
			}
		}
	}
	return paths
}

var (
	mainRE   = regexp.MustCompile(`(?s)<main>(.*)</main>`)
	footerRE = regexp.MustCompile(`<footer>Snapshot [^<]*</footer>`)
	hxRE     = regexp.MustCompile(` hx-[a-z]+="[^"]*"`)
)

// mainContent is a page's <main> without the snapshot time and the live-refresh attributes: what a person
// reads about the storage.
func mainContent(html string) string {
	m := mainRE.FindStringSubmatch(html)
	if m == nil {
		return html
	}
	return hxRE.ReplaceAllString(footerRE.ReplaceAllString(m[1], ""), "")
}

// ComparePages renders every page of the live snapshot with the web console twice — once from the live
// source, once from the bundle (as `lvms console --bundle` serves it) — and fails on any page whose content
// differs or that lacks the read-only banner. It returns the number of pages compared.
func ComparePages(t testing.TB, liveSrc, bundleSrc console.Source, b *web.Bundle) int {
	t.Helper()
	problems, n, err := DiffPages(liveSrc, bundleSrc, b)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range problems {
		t.Error(p)
	}
	return n
}

// DiffPages is ComparePages without a test: it returns one message per page that differs.
func DiffPages(liveSrc, bundleSrc console.Source, b *web.Bundle) ([]string, int, error) {
	snap, err := liveSrc.Snapshot(context.Background())
	if err != nil {
		return nil, 0, err
	}
	live := web.NewServer(web.Options{Sources: web.StaticSources(liveSrc)})
	offline := web.NewServer(web.Options{Sources: web.StaticSources(bundleSrc), Bundle: b})
	get := func(h http.Handler, path string) (int, string) {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, path, nil))
		body, _ := io.ReadAll(rec.Body)
		return rec.Code, string(body)
	}
	var problems []string
	paths := Pages(snap)
	for _, p := range paths {
		lc, lb := get(live, p)
		bc, bb := get(offline, p)
		if lc != bc {
			problems = append(problems, fmt.Sprintf("%s: status %d live, %d from the bundle", p, lc, bc))
			continue
		}
		if !strings.Contains(bb, `data-testid="bundle-banner"`) {
			problems = append(problems, p+" from the bundle has no read-only banner")
		}
		if l, o := mainContent(lb), mainContent(bb); l != o {
			i := 0
			for i < len(l) && i < len(o) && l[i] == o[i] {
				i++
			}
			problems = append(problems, fmt.Sprintf("%s differs between live and the bundle at byte %d:\nlive:   ...%s\nbundle: ...%s", p, i, clip(l, i), clip(o, i)))
		}
	}
	return problems, len(paths), nil
}

func clip(s string, i int) string {
	start, end := max(0, i-80), min(len(s), i+200)
	return s[start:end]
}
