package web_test

import (
	"context"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/PuerkitoBio/goquery"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/lvms-dev/lvms/api"
	moveapi "github.com/lvms-dev/lvms/api/move"
	"github.com/lvms-dev/lvms/console"
	"github.com/lvms-dev/lvms/console/consoletest"
	"github.com/lvms-dev/lvms/migrate/wizard"
	"github.com/lvms-dev/lvms/web"
)

const movePath = "/claims/lvms/data-db-0/move"

// moveState is the prepared state with claim lvms/data-db-0 annotated by edit (nil: left alone).
func moveState(edit func(c *corev1.PersistentVolumeClaim)) []client.Object {
	objs := consoletest.Prepared("lvms")
	for _, o := range objs {
		if c, ok := o.(*corev1.PersistentVolumeClaim); ok && edit != nil {
			edit(c)
		}
	}
	return objs
}

// moveServer serves the prepared state, acting for its callers with a fake API server holding the same
// objects; tokens records the bearer tokens the callers' clients were asked for.
func moveServer(t *testing.T, objs []client.Object) (http.Handler, client.Client, *[]string) {
	t.Helper()
	c := fake.NewClientBuilder().WithScheme(api.NewScheme()).WithObjects(objs...).Build()
	var tokens []string
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	snap := console.FromObjects(objs, consoletest.At)
	h := web.NewServer(web.Options{Sources: web.StaticSources(console.Static{Snap: snap}), Migration: &web.Migration{
		Clients: func(_ context.Context, token string) (client.Client, error) {
			tokens = append(tokens, token)
			return c, nil
		},
		Runner: wizard.NewRunner(ctx, nil),
	}})
	return h, c, &tokens
}

func claimAnnotations(t *testing.T, c client.Client) map[string]string {
	t.Helper()
	pvc := &corev1.PersistentVolumeClaim{}
	if err := c.Get(context.Background(), types.NamespacedName{Namespace: "lvms", Name: "data-db-0"}, pvc); err != nil {
		t.Fatal(err)
	}
	return pvc.Annotations
}

func unescape(s string) string {
	return strings.NewReplacer("&#34;", `"`, "&#39;", "'", "&amp;", "&").Replace(s)
}

// The move page of a claim without a move offers the other nodes with its device class; the move is
// requested only by a POST from the console's own page with the caller's CSRF token, as the caller; a
// node name the API would refuse is a 400 with move.Request's own message; a request writes the to-node
// annotation on the claim.
func TestMove_RequestIsProtectedAndWritesTheAnnotation(t *testing.T) {
	h, c, tokens := moveServer(t, moveState(nil))
	rec, doc := get(t, h, movePath, "Authorization", "Bearer alice-token")
	if rec.Code != http.StatusOK {
		t.Fatalf("move page: %d: %.400s", rec.Code, rec.Body.String())
	}
	var options []string
	doc.Find(testid("move-node") + " option").Each(func(_ int, s *goquery.Selection) { options = append(options, s.AttrOr("value", "")) })
	if len(options) == 0 || containsString(options, consoletest.NodeA) {
		t.Errorf("target nodes %v: want the other nodes with device class fast, not worker-a where the volume is", options)
	}
	if doc.Find(testid("move-none")).Length() != 1 || doc.Find(testid("move-confirm-form")).Length()+doc.Find(testid("move-abort-form")).Length() != 0 {
		t.Error("a claim without a move should say so and offer no confirm or abort")
	}
	csrf := doc.Find(testid("move-request-form")+` input[name="csrf"]`).AttrOr("value", "")
	if csrf == "" {
		t.Fatal("the move form carries no CSRF token")
	}
	self := "http://example.com"
	asAlice := []string{"Origin", self, "Authorization", "Bearer alice-token"}
	tests := []struct {
		name   string
		form   url.Values
		header []string
		want   int
		text   string
	}{
		{"no CSRF token", url.Values{"node": {consoletest.NodeB}}, asAlice, 403, "CSRF token is missing or not yours"},
		{"another caller's token", url.Values{"node": {consoletest.NodeB}, "csrf": {csrf}}, []string{"Origin", self, "Authorization", "Bearer bob"}, 403, "CSRF token is missing or not yours"},
		{"another site", url.Values{"node": {consoletest.NodeB}, "csrf": {csrf}}, []string{"Origin", "http://evil.example", "Authorization", "Bearer alice-token"}, 403, "comes from http://evil.example"},
		{"bad node name", url.Values{"node": {"Not_A_Node"}, "csrf": {csrf}}, asAlice, 400, `--to-node "Not_A_Node" is not a node name`},
		{"unknown action", url.Values{"csrf": {csrf}}, asAlice, 404, "has no action"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			before := len(*tokens)
			p := movePath + "/request"
			if tc.name == "unknown action" {
				p = movePath + "/wipe"
			}
			rec := post(h, p, tc.form, tc.header...)
			if body := unescape(rec.Body.String()); rec.Code != tc.want || !strings.Contains(body, tc.text) {
				t.Errorf("status %d, want %d with %q: %.600s", rec.Code, tc.want, tc.text, body)
			}
			if reached := len(*tokens) > before; reached != (tc.want == 400) {
				t.Errorf("the caller's client was asked for: %v", reached)
			}
			if _, ok := claimAnnotations(t, c)[moveapi.AnnotationToNode]; ok {
				t.Error("a refused request wrote the to-node annotation")
			}
		})
	}
	if rec, _ := get(t, h, movePath+"/request"); rec.Code != http.StatusMethodNotAllowed {
		t.Errorf("GET of the request endpoint: %d, want 405", rec.Code)
	}
	rec = post(h, movePath+"/request", url.Values{"node": {consoletest.NodeB}, "csrf": {csrf}}, asAlice...)
	if rec.Code != http.StatusSeeOther || rec.Header().Get("Location") != movePath {
		t.Fatalf("request: %d to %q: %.400s", rec.Code, rec.Header().Get("Location"), rec.Body.String())
	}
	if got := claimAnnotations(t, c)[moveapi.AnnotationToNode]; got != consoletest.NodeB {
		t.Errorf("to-node annotation = %q, want %s", got, consoletest.NodeB)
	}
	if last := (*tokens)[len(*tokens)-1]; last != "alice-token" {
		t.Errorf("the request was made with token %q, want the caller's", last)
	}
}

// A move waiting for confirmation shows its status with the move ID and a Confirm button; a confirmation
// with another ID is refused with move.Confirm's message; the right ID writes the confirm annotation.
func TestMove_ConfirmAndStatus(t *testing.T) {
	st := `{"id":"abc123","phase":"AwaitingConfirmation","targetNode":"worker-b","sourcePV":"pvc-0a1","targetPV":"lvms-move-abc123","message":"the claim uses the new volume"}`
	objs := moveState(func(c *corev1.PersistentVolumeClaim) {
		c.Annotations = map[string]string{moveapi.AnnotationToNode: consoletest.NodeB, moveapi.AnnotationStatus: st}
	})
	h, c, _ := moveServer(t, objs)
	_, doc := get(t, h, movePath)
	status := doc.Find(testid("move-page") + " " + testid("move-status"))
	if status.AttrOr("data-phase", "") != "AwaitingConfirmation" || status.Find(testid("move-id")).Text() != "abc123" ||
		status.Find(testid("move-target")).Text() != consoletest.NodeB || !strings.Contains(status.Text(), "the claim uses the new volume") {
		t.Errorf("move status = %q", status.Text())
	}
	if doc.Find(testid("move-request-form")).Length()+doc.Find(testid("move-abort-form")).Length() != 0 {
		t.Error("a move awaiting confirmation offers a new request or an abort")
	}
	confirm := doc.Find(testid("move-confirm-form"))
	if confirm.Find(`input[name="id"]`).AttrOr("value", "") != "abc123" || !strings.Contains(confirm.Text(), "Confirm move abc123") {
		t.Fatalf("confirm form = %q", confirm.Text())
	}
	csrf := confirm.Find(`input[name="csrf"]`).AttrOr("value", "")
	rec := post(h, movePath+"/confirm", url.Values{"id": {"other"}, "csrf": {csrf}}, "Origin", "http://example.com")
	if body := unescape(rec.Body.String()); rec.Code != http.StatusConflict || !strings.Contains(body, `move "other" is not the claim's move (abc123)`) {
		t.Errorf("confirm with another ID: %d: %.600s", rec.Code, body)
	}
	rec = post(h, movePath+"/confirm", url.Values{"id": {"abc123"}, "csrf": {csrf}}, "Origin", "http://example.com")
	if rec.Code != http.StatusSeeOther || claimAnnotations(t, c)[moveapi.AnnotationConfirm] != "abc123" {
		t.Errorf("confirm: %d, annotations %v", rec.Code, claimAnnotations(t, c))
	}
	// The volumes page and the node page show the status beside the claim, with a link to the move page.
	for _, page := range []string{"/volumes", "/nodes/" + consoletest.NodeA} {
		_, doc := get(t, h, page)
		row := doc.Find(testid("volume-row") + `[data-volume="pvc-0a1"]`)
		if row.Find(testid("move-status")).AttrOr("data-target", "") != consoletest.NodeB || row.Find(testid("move-link")).AttrOr("href", "") != movePath {
			t.Errorf("%s: volume row %q lacks the move status or the move link", page, row.Text())
		}
	}
}

// A running copy shows its progress and an Abort button (and the page refreshes itself); the abort writes
// the abort annotation with the move ID.
func TestMove_AbortWhileCopying(t *testing.T) {
	st := `{"id":"def456","phase":"Copying","targetNode":"worker-c","sourcePV":"pvc-0a1","targetPV":"lvms-move-def456","progress":"12/40"}`
	h, c, _ := moveServer(t, moveState(func(c *corev1.PersistentVolumeClaim) {
		c.Annotations = map[string]string{moveapi.AnnotationToNode: consoletest.NodeC, moveapi.AnnotationStatus: st}
	}))
	_, doc := get(t, h, movePath)
	if got := doc.Find(testid("move-progress")).Text(); got != "12/40" {
		t.Errorf("progress = %q", got)
	}
	if doc.Find(testid("live")).AttrOr("hx-trigger", "") == "" {
		t.Error("the page of a running move does not refresh itself")
	}
	if doc.Find(testid("move-request-form")).Length()+doc.Find(testid("move-confirm-form")).Length() != 0 {
		t.Error("a running copy offers a new request or a confirmation")
	}
	csrf := doc.Find(testid("move-abort-form")+` input[name="csrf"]`).AttrOr("value", "")
	rec := post(h, movePath+"/abort", url.Values{"csrf": {csrf}}, "Origin", "http://example.com")
	if rec.Code != http.StatusSeeOther || claimAnnotations(t, c)[moveapi.AnnotationAbort] != "def456" {
		t.Errorf("abort: %d, annotations %v: %.400s", rec.Code, claimAnnotations(t, c), rec.Body.String())
	}
}

// Without caller clients (no write path) the move page shows the command line to run, and nothing can be
// posted.
func TestMove_CommandLineWithoutWritePath(t *testing.T) {
	h := preparedServer()
	rec, doc := get(t, h, movePath)
	if rec.Code != http.StatusOK {
		t.Fatalf("move page: %d", rec.Code)
	}
	cmd := doc.Find(testid("move-command")).Text()
	if !strings.HasPrefix(cmd, "lvms move pvc data-db-0 -n lvms --to-node ") || strings.HasSuffix(cmd, consoletest.NodeA) {
		t.Errorf("command line = %q", cmd)
	}
	if doc.Find("form[method=post]").Length() != 0 {
		t.Error("forms offered without a write path")
	}
	if rec := post(h, movePath+"/request", url.Values{"node": {consoletest.NodeB}}, "Origin", "http://example.com"); rec.Code != http.StatusMethodNotAllowed {
		t.Errorf("POST without a write path: %d, want 405", rec.Code)
	}
	if rec, _ := get(t, h, "/claims/lvms/no-such-claim/move"); rec.Code != http.StatusNotFound {
		t.Errorf("move page of an unknown claim: %d, want 404", rec.Code)
	}
}

// A claim of an LVMS class without a volume yet is listed on the Volumes page with why it is pending, and
// its move page says there is nothing to move (not a 404, and no move form).
func TestPendingClaim_ListedWithWhyAndNothingToMove(t *testing.T) {
	sc := "lvms-fast"
	waiting := &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "lvms", Name: "waiting"},
		Spec: corev1.PersistentVolumeClaimSpec{StorageClassName: &sc, Resources: corev1.VolumeResourceRequirements{
			Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}}},
		Status: corev1.PersistentVolumeClaimStatus{Phase: corev1.ClaimPending}}
	missing := "lvms-gone"
	orphan := waiting.DeepCopy()
	orphan.Name, orphan.Spec.StorageClassName = "no-class", &missing
	h, _, _ := moveServer(t, append(moveState(nil), waiting, orphan))

	rec, doc := get(t, h, "/volumes", "Authorization", "Bearer alice-token")
	if rec.Code != http.StatusOK {
		t.Fatalf("volumes page: %d", rec.Code)
	}
	for claim, why := range map[string]string{
		"lvms/waiting":  "no node is chosen",
		"lvms/no-class": "names StorageClass lvms-gone, which does not exist",
	} {
		row := doc.Find(`[data-testid="volume-row"][data-claim="` + claim + `"]`)
		if row.Length() != 1 || !strings.Contains(row.Text(), "none yet") || !strings.Contains(unescape(row.Text()), why) {
			t.Errorf("row of pending claim %s: %q, want it listed with %q", claim, row.Text(), why)
		}
	}
	rec, doc = get(t, h, "/claims/lvms/waiting/move", "Authorization", "Bearer alice-token")
	if rec.Code != http.StatusOK || doc.Find(testid("move-pending")).Length() != 1 || doc.Find(testid("move-request-form")).Length() != 0 {
		t.Errorf("move page of a pending claim: %d, want it to say there is nothing to move, without a form:\n%.600s", rec.Code, rec.Body.String())
	}
}
