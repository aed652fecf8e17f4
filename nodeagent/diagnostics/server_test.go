package diagnostics

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	clocktesting "k8s.io/utils/clock/testing"

	lvmv2 "github.com/lvms-dev/lvms/api/lvm/v2alpha1"
	"github.com/lvms-dev/lvms/nodeagent/blockdev/blockdevtest"
	"github.com/lvms-dev/lvms/nodeagent/desired"
	"github.com/lvms-dev/lvms/nodeagent/lvm"
	"github.com/lvms-dev/lvms/nodeagent/lvm/lvmtest"
	"github.com/lvms-dev/lvms/nodeagent/selector"
)

// readOnlyReplay answers the view's read-only fullreport with the recorded plain one (the same report: the
// recording was made without --readonly) and fails the commands listed in fail.
type readOnlyReplay struct {
	next lvm.Executor
	fail map[string]bool
}

func (r readOnlyReplay) Execute(ctx context.Context, cmd lvm.Command) (lvm.Result, error) {
	if r.fail[cmd.Argv[0]] {
		return lvm.Result{ExitCode: 1, Stderr: []byte(cmd.Argv[0] + ": failed for the test")}, nil
	}
	cmd.Argv = slices.DeleteFunc(slices.Clone(cmd.Argv), func(a string) bool { return a == "--readonly" })
	return r.next.Execute(ctx, cmd)
}

type allowAll struct{ err error }

func (a allowAll) Authorize(context.Context, *http.Request) (string, error) { return "tester", a.err }

func hostLoopsServer(t *testing.T, fail map[string]bool, lvmdYAML string, auth Authorizer) *Server {
	t.Helper()
	dir := filepath.Join(blockdevtest.Dir(), "host-loops")
	rp := lvmtest.Replay(t, filepath.Join(dir, "session.json"), "record it with nodeagent/blockdev/testdata/record-host-loops.sh")
	rp.Repeat = "the server reads the host anew for every view it serves"
	rp.AllowUnused = "a refused request reads nothing"
	runner := lvm.Runner{Exec: readOnlyReplay{next: rp, fail: fail}, DevicesFile: "rec-a.devices"}
	lvmdPath := filepath.Join(t.TempDir(), "lvmd.yaml")
	if lvmdYAML != "" {
		if err := os.WriteFile(lvmdPath, []byte(lvmdYAML), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	sel, err := selector.FromV2(lvmv2.DeviceSelector{DeviceSelectorTerms: []lvmv2.DeviceSelectorTerm{{MatchExpressions: []lvmv2.DeviceSelectorRequirement{
		{Key: lvmv2.KeyKName, Operator: lvmv2.OpIn, Values: []string{"/dev/loop1", "/dev/loop2", "/dev/loop4", "/dev/nvme9n1"}}}}}})
	if err != nil {
		t.Fatal(err)
	}
	node := &desired.Node{VolumeGroups: []desired.VolumeGroup{
		{Name: "rec-vg1", Selector: sel},
		{Name: "broken", SelectorError: "size Gt needs a quantity"},
	}}
	srv, err := New(Options{Node: "node-a", Version: "v9.9.9", Runner: runner, Root: filepath.Join(dir, "root"), LVMDConfigPath: lvmdPath,
		Desired:    func(context.Context) (*desired.Node, error) { return node, nil },
		Authorizer: auth, Clock: clocktesting.NewFakePassiveClock(time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC))})
	if err != nil {
		t.Fatal(err)
	}
	return srv
}

const validLVMD = `socket-name: /run/topolvm/lvmd.sock
device-classes:
  - name: fast
    volume-group: rec-vg1
    default: true
    spare-gb: 0
`

func get(t *testing.T, h http.Handler, method, path string) *httptest.ResponseRecorder {
	t.Helper()
	req := httptest.NewRequest(method, path, nil)
	req.Header.Set("Authorization", "Bearer abc")
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	return rec
}

func TestServer_ViewOfRecordedHost(t *testing.T) {
	srv := hostLoopsServer(t, nil, validLVMD, allowAll{})
	rec := get(t, srv, http.MethodGet, Path)
	if rec.Code != http.StatusOK {
		t.Fatalf("status %d: %s", rec.Code, rec.Body)
	}
	v, err := DecodeView(rec.Body.Bytes())
	if err != nil {
		t.Fatal(err)
	}
	if v.Node != "node-a" || v.Version != "v9.9.9" || !v.Time.Equal(time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)) {
		t.Errorf("node %q version %q time %s", v.Node, v.Version, v.Time)
	}
	if len(v.Errors) != 0 {
		t.Errorf("errors = %+v, want none", v.Errors)
	}
	if !strings.Contains(string(v.Lsblk), `"/dev/loop2"`) || !strings.Contains(string(v.FullReport), "rec-vg1") {
		t.Errorf("lsblk or fullreport output missing:\n%s\n%s", v.Lsblk, v.FullReport)
	}
	if v.LVMD == nil || !v.LVMD.Exists || v.LVMD.Invalid != "" || !strings.Contains(v.LVMD.Content, "rec-vg1") {
		t.Errorf("lvmd = %+v, want the valid file", v.LVMD)
	}
	if len(v.Verdicts) != 2 {
		t.Fatalf("verdicts = %+v, want two volume groups", v.Verdicts)
	}
	vg := v.Verdicts[0]
	got := map[string]string{}
	for _, d := range vg.Devices {
		codes := []string{}
		for _, r := range d.Reasons {
			codes = append(codes, r.Code)
		}
		got[d.KName] = d.Verdict + " " + strings.Join(codes, ",")
	}
	want := map[string]string{
		"/dev/loop2":   "member ",
		"/dev/loop1":   "new ",
		"/dev/loop4":   "excluded ReadOnly",
		"/dev/nvme9n1": "excluded NotFound",
	}
	for k, w := range want {
		if got[k] != w {
			t.Errorf("%s: verdict %q, want %q (all: %v)", k, got[k], w, got)
		}
	}
	if !vg.Exists {
		t.Error("rec-vg1 should exist")
	}
	if v.Verdicts[1].SelectorError == "" || len(v.Verdicts[1].Devices) != 0 {
		t.Errorf("broken volume group = %+v, want its selector error and no devices", v.Verdicts[1])
	}
}

func TestServer_FailedSectionsAreReportedAndTheRestServed(t *testing.T) {
	tests := []struct {
		name       string
		fail       map[string]bool
		lvmd       string
		wantErrors []string
		wantLsblk  bool
		wantReport bool
		wantLVMD   string // "missing", "invalid" or "valid"
	}{
		{name: "lsblk fails", fail: map[string]bool{"lsblk": true}, lvmd: validLVMD,
			wantErrors: []string{SectionLsblk, SectionVerdicts}, wantReport: true, wantLVMD: "valid"},
		{name: "lvm fails", fail: map[string]bool{"lvm": true}, lvmd: "device-classes: [",
			wantErrors: []string{SectionFullReport, SectionVerdicts}, wantLsblk: true, wantLVMD: "invalid"},
		{name: "no lvmd.yaml", wantLsblk: true, wantReport: true, wantLVMD: "missing"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			v := hostLoopsServer(t, tc.fail, tc.lvmd, allowAll{}).View(context.Background())
			var sections []string
			for _, e := range v.Errors {
				sections = append(sections, e.Section)
				if e.Error == "" {
					t.Errorf("section %s failed without a message", e.Section)
				}
			}
			if !slices.Equal(sections, tc.wantErrors) {
				t.Errorf("failed sections = %v (%+v), want %v", sections, v.Errors, tc.wantErrors)
			}
			if (len(v.Lsblk) > 0) != tc.wantLsblk || (len(v.FullReport) > 0) != tc.wantReport {
				t.Errorf("lsblk %d bytes, fullreport %d bytes; want lsblk %v fullreport %v", len(v.Lsblk), len(v.FullReport), tc.wantLsblk, tc.wantReport)
			}
			state := "valid"
			switch {
			case !v.LVMD.Exists:
				state = "missing"
			case v.LVMD.Invalid != "":
				state = "invalid"
			}
			if state != tc.wantLVMD {
				t.Errorf("lvmd.yaml %s (%+v), want %s", state, v.LVMD, tc.wantLVMD)
			}
			if _, err := json.Marshal(v); err != nil {
				t.Errorf("the view does not encode: %v", err)
			}
		})
	}
}

func TestServer_RefusesWhatItShouldNotServe(t *testing.T) {
	tests := []struct {
		name   string
		auth   Authorizer
		method string
		path   string
		want   int
	}{
		{name: "no token", auth: allowAll{err: ErrNoToken}, method: http.MethodGet, path: Path, want: http.StatusUnauthorized},
		{name: "bad token", auth: allowAll{err: ErrUnauthenticated}, method: http.MethodGet, path: Path, want: http.StatusUnauthorized},
		{name: "forbidden", auth: allowAll{err: &ForbiddenError{User: "eve", Namespace: "lvms", Node: "node-a"}}, method: http.MethodGet, path: Path, want: http.StatusForbidden},
		{name: "api server down", auth: allowAll{err: errors.New("connection refused")}, method: http.MethodGet, path: Path, want: http.StatusServiceUnavailable},
		{name: "post", auth: allowAll{}, method: http.MethodPost, path: Path, want: http.StatusMethodNotAllowed},
		{name: "other path", auth: allowAll{}, method: http.MethodGet, path: "/debug/pprof", want: http.StatusNotFound},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			rec := get(t, hostLoopsServer(t, nil, "", tc.auth), tc.method, tc.path)
			if rec.Code != tc.want {
				t.Errorf("status %d, want %d: %s", rec.Code, tc.want, rec.Body)
			}
			if strings.Contains(rec.Body.String(), "/dev/loop") {
				t.Errorf("a refused request got device data: %s", rec.Body)
			}
		})
	}
}

func TestNew_RequiresNodeAndAuthorizer(t *testing.T) {
	if _, err := New(Options{Node: "a"}); err == nil || !strings.Contains(err.Error(), "authorizer") {
		t.Errorf("without an authorizer: %v, want an error naming it", err)
	}
	if _, err := New(Options{Authorizer: allowAll{}}); err == nil || !strings.Contains(err.Error(), "node name") {
		t.Errorf("without a node: %v, want an error naming it", err)
	}
}

func TestDecodeView_RefusesOtherVersions(t *testing.T) {
	for _, data := range []string{`{"apiVersion":"diagnostics.lvm.topolvm.io/v2","node":"a"}`, `{"node":"a"}`, `not json`, ``} {
		if _, err := DecodeView([]byte(data)); err == nil {
			t.Errorf("DecodeView(%q) succeeded", data)
		}
	}
}

func FuzzDecodeView(f *testing.F) {
	f.Add([]byte(`{"apiVersion":"diagnostics.lvm.topolvm.io/v1","node":"a","verdicts":[{"name":"vg","devices":[{"kname":"/dev/sda"}]}]}`))
	f.Add([]byte(`{"apiVersion":"diagnostics.lvm.topolvm.io/v1","lsblk":{"blockdevices":[]}}`))
	f.Add([]byte(`{"apiVersion":"diagnostics.lvm.topolvm.io/v1","time":"2026-11-22T10:00:00.5+01:00","lsblk":{ "blockdevices" : [ ] },"lvmd":{"path":"/etc/topolvm/lvmd.yaml","exists":true,"content":"x"},"errors":[{"section":"lsblk","error":"boom"}]}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		v, err := DecodeView(data)
		if err != nil {
			return
		}
		if v.APIVersion != ViewAPIVersion {
			t.Errorf("accepted apiVersion %q", v.APIVersion)
		}
		// The agent encodes a view, the console and bundles decode it: nothing may change on the way.
		out, err := json.Marshal(v)
		if err != nil {
			t.Fatalf("a decoded view does not encode: %v", err)
		}
		back, err := DecodeView(out)
		if err != nil {
			t.Fatalf("an encoded view does not decode: %v\n%s", err, out)
		}
		// Raw lsblk and lvm2 JSON is passed on as is, only compacted and HTML-escaped by the encoder ("&" is
		// sent as "\u0026": the same JSON string).
		for _, raw := range []*json.RawMessage{&v.Lsblk, &v.FullReport} {
			var c, e bytes.Buffer
			if len(*raw) > 0 && json.Compact(&c, *raw) == nil {
				json.HTMLEscape(&e, c.Bytes())
				*raw = e.Bytes()
			}
		}
		if !cmp.Equal(v, back, cmpopts.EquateEmpty()) {
			t.Errorf("round trip changed the view:\n%s", cmp.Diff(v, back, cmpopts.EquateEmpty()))
		}
	})
}
