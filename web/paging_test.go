package web_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/PuerkitoBio/goquery"

	"github.com/lvms-dev/lvms/console"
	"github.com/lvms-dev/lvms/console/consoletest"
	"github.com/lvms-dev/lvms/web"
)

// largeServer serves 5,000 nodes: every 50th is Degraded (100 nodes), the others Ready.
func largeServer() http.Handler {
	snap := console.FromObjects(consoletest.Large(5000, 16), consoletest.At)
	return web.NewServer(web.Options{Sources: web.StaticSources(console.Static{Snap: snap})})
}

func nodeRows(doc *goquery.Document) []string {
	var out []string
	doc.Find(testid("node-row")).Each(func(_ int, s *goquery.Selection) { out = append(out, s.AttrOr("data-node", "")) })
	return out
}

// At 5,000 nodes the overview lists the nodes that need attention first, a page at a time, says how many
// it does not show, and links the other pages; the totals count every node.
func TestOverviewPage_ThousandsOfNodesArePaged(t *testing.T) {
	h := largeServer()
	_, doc := get(t, h, "/")
	rows := nodeRows(doc)
	if len(rows) != 100 || rows[0] != "node-0000" || rows[99] != "node-4950" {
		t.Fatalf("page 1 lists %d nodes from %v, want the 100 Degraded nodes node-0000 … node-4950", len(rows), rows[:min(len(rows), 3)])
	}
	first := doc.Find(testid("node-row")).First()
	if !strings.Contains(first.Text(), "Degraded") || first.Find(testid("diff-marker")).Length() != 1 {
		t.Errorf("first row %q: want the Degraded node with its diff marker", first.Text())
	}
	if got := doc.Find(testid("node-page")).Text(); !strings.Contains(got, "Nodes 1–100 of 5000") || !strings.Contains(got, "4900 more on the next pages") {
		t.Errorf("page note = %q, want which nodes are shown and how many are on further pages", got)
	}
	if got := doc.Find(testid("card-nodes-ready")).Text(); !strings.Contains(got, "4900 / 5000") {
		t.Errorf("nodes ready card = %q, want every node counted", got)
	}
	if doc.Find(testid("prev-page")).Length() != 0 {
		t.Error("page 1 links a previous page")
	}
	next := doc.Find(testid("next-page"))
	if href := next.AttrOr("href", ""); href != "/?page=2" || !strings.Contains(next.Text(), "Next 100 nodes") {
		t.Fatalf("next page link = %q %q, want /?page=2", href, next.Text())
	}

	_, doc = get(t, h, "/?page=2")
	if rows := nodeRows(doc); len(rows) != 100 || rows[0] != "node-0001" || rows[1] != "node-0002" {
		t.Errorf("page 2 lists %v…, want the Ready nodes from node-0001", rows[:min(len(rows), 3)])
	}
	if got := doc.Find(testid("node-page")).Text(); !strings.Contains(got, "Nodes 101–200 of 5000") || !strings.Contains(got, "4800 more") || !strings.Contains(got, "100 on the previous pages") {
		t.Errorf("page 2 note = %q", got)
	}
	if href := doc.Find(testid("prev-page")).AttrOr("href", ""); href != "/" {
		t.Errorf("previous page link = %q, want /", href)
	}
	if got := doc.Find(testid("live")).AttrOr("hx-get", ""); got != "/?page=2" {
		t.Errorf("page 2 refreshes from %q, want itself", got)
	}

	for _, path := range []string{"/?page=50", "/?page=999"} {
		_, doc = get(t, h, path)
		rows := nodeRows(doc)
		if len(rows) != 100 || rows[len(rows)-1] != "node-4999" || doc.Find(testid("next-page")).Length() != 0 {
			t.Errorf("%s: %d rows ending with %v, want the last page ending with node-4999 and no next link", path, len(rows), rows[len(rows)-1:])
		}
	}
}

// The filter works over every node and keeps itself on the other pages.
func TestOverviewPage_FilterIsPagedToo(t *testing.T) {
	h := largeServer()
	_, doc := get(t, h, "/?q=node-1&page=2")
	// Page 1 holds node-1000's 20 Degraded nodes and 80 Ready ones up to node-1081.
	rows := nodeRows(doc)
	if len(rows) != 100 || rows[0] != "node-1082" || !strings.HasPrefix(rows[99], "node-1") {
		t.Errorf("rows %v…, want page 2 of the nodes named node-1…", rows[:min(len(rows), 2)])
	}
	if got := doc.Find(testid("node-page")).Text(); !strings.Contains(got, `of 1000 nodes matching "node-1"`) {
		t.Errorf("page note = %q", got)
	}
	if href := doc.Find(testid("next-page")).AttrOr("href", ""); href != "/?page=3&q=node-1" {
		t.Errorf("next page link = %q, want the filter kept", href)
	}
	_, doc = get(t, h, "/?q=node-4999")
	if rows := nodeRows(doc); len(rows) != 1 || doc.Find(testid("node-pager")).Length() != 0 {
		t.Errorf("rows %v, want node-4999 alone without page links", rows)
	}
	if got := doc.Find(testid("node-page")).Text(); !strings.Contains(got, `The only node matching "node-4999".`) {
		t.Errorf("page note = %q", got)
	}
}

// The JSON API lists every node by default; q, offset and limit page it, with the total in X-Total-Count.
func TestAPI_NodesPaged(t *testing.T) {
	h := largeServer()
	status, body, _ := apiGet(t, h, "GET", "/api/v1/nodes")
	if n := len(body["list"].([]any)); status != http.StatusOK || n != 5000 {
		t.Errorf("GET /api/v1/nodes: %d with %d nodes, want every node", status, n)
	}
	status, body, hdr := apiGet(t, h, "GET", "/api/v1/nodes?offset=100&limit=2")
	list, _ := body["list"].([]any)
	if status != http.StatusOK || len(list) != 2 || list[0].(map[string]any)["name"] != "node-0001" || hdr.Get("X-Total-Count") != "5000" {
		t.Errorf("offset 100, limit 2: %d %v total %q, want node-0001 and node-0002 of 5000", status, list, hdr.Get("X-Total-Count"))
	}
	_, body, hdr = apiGet(t, h, "GET", "/api/v1/nodes?q=degraded&offset=99")
	if list, _ := body["list"].([]any); len(list) != 1 || list[0].(map[string]any)["name"] != "node-4950" || hdr.Get("X-Total-Count") != "100" {
		t.Errorf("the last Degraded node: %v total %q", list, hdr.Get("X-Total-Count"))
	}
	status, body, _ = apiGet(t, h, "GET", "/api/v1/nodes?limit=ten")
	if e, _ := body["error"].(map[string]any); status != http.StatusBadRequest || e["code"] != "BadRequest" || !strings.Contains(e["message"].(string), "Limit must be a number") {
		t.Errorf("limit=ten: %d %v, want 400 BadRequest naming limit", status, body)
	}
}
