package explain_test

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"

	"github.com/lvms-dev/lvms/console/explain"
)

// apiConstants reads the constants of a given type from api/lvm/v2alpha1/conditions.go, so a code added to
// the API without an explanation fails this test.
func apiConstants(t *testing.T, typeName string, valuePrefix string) []string {
	t.Helper()
	_, file, _, _ := runtime.Caller(0)
	path := filepath.Join(filepath.Dir(file), "..", "..", "api", "lvm", "v2alpha1", "conditions.go")
	f, err := parser.ParseFile(token.NewFileSet(), path, nil, 0)
	if err != nil {
		t.Fatalf("parse %s: %v", path, err)
	}
	var out []string
	for _, d := range f.Decls {
		g, ok := d.(*ast.GenDecl)
		if !ok || g.Tok != token.CONST {
			continue
		}
		for _, s := range g.Specs {
			vs := s.(*ast.ValueSpec)
			typ := ""
			if id, ok := vs.Type.(*ast.Ident); ok {
				typ = id.Name
			}
			for i, n := range vs.Names {
				if typ != typeName || !strings.HasPrefix(n.Name, valuePrefix) {
					continue
				}
				lit := vs.Values[i].(*ast.BasicLit)
				out = append(out, strings.Trim(lit.Value, `"`))
			}
		}
	}
	if len(out) == 0 {
		t.Fatalf("no %s constants found in %s", typeName, path)
	}
	return out
}

func TestReason_EveryAPICodeIsExplained(t *testing.T) {
	codes := apiConstants(t, "ReasonCode", "Reason")
	if got := explain.Codes(); !slices.Equal(got, codes) {
		t.Errorf("Codes() = %v, want the API's codes in filter order %v", got, codes)
	}
	for _, code := range codes {
		t.Run(code, func(t *testing.T) {
			x := explain.Reason(code, explain.Context{Node: "worker-b", Device: "/dev/sdx", VolumeGroup: "vg1"})
			if !x.Known || x.Title == "" || x.Why == "" || len(x.Next) == 0 {
				t.Fatalf("explanation incomplete: %+v", x)
			}
			if explain.Filter(code) == code {
				t.Errorf("Filter(%s) has no filter name", code)
			}
			for _, s := range append([]string{x.Why, x.Warning}, stepTexts(x)...) {
				if strings.ContainsAny(s, "{}") {
					t.Errorf("unfilled placeholder in %q", s)
				}
			}
		})
	}
}

func stepTexts(x explain.Explanation) []string {
	var out []string
	for _, s := range x.Next {
		out = append(out, s.Text, s.Command)
	}
	return out
}

// Advice that destroys data must carry a warning.
func TestDestructiveAdviceCarriesWarning(t *testing.T) {
	destructive := []string{"wipefs --all", "vgremove", "pvremove", "forceWipeDevicesAndDestroyAllData: true"}
	var all []explain.Explanation
	for _, c := range explain.Codes() {
		all = append(all, explain.Reason(c, explain.Context{Device: "/dev/sdx"}))
	}
	for _, c := range explain.ConditionTypes() {
		all = append(all, explain.Condition(c, "R", "m", explain.Context{}))
	}
	for _, topic := range []string{explain.TopicUnexpectedDevice, explain.TopicVolumeOrphaned, explain.TopicThinMetadataHigh} {
		all = append(all, explain.Topic(topic, "", explain.Context{}))
	}
	checked := 0
	for _, x := range all {
		for _, s := range stepTexts(x) {
			for _, d := range destructive {
				if strings.Contains(s, d) {
					checked++
					if !strings.Contains(x.Warning, "destroy") {
						t.Errorf("%s advises %q without a data-loss warning (warning %q)", x.Code, d, x.Warning)
					}
				}
			}
		}
	}
	if checked < 3 {
		t.Fatalf("found only %d destructive steps; the catalog is expected to advise wiping in several places", checked)
	}
}

func TestReason_UnknownCodeKeepsTheAgentsSentence(t *testing.T) {
	x := explain.Reason("LockedEncryption", explain.Context{Node: "worker-b", Device: "/dev/sdd",
		Sentence: "/dev/sdd is a locked LUKS2 container and cannot be opened"})
	if x.Known {
		t.Error("Known = true for a code the console does not know")
	}
	if x.Why != "/dev/sdd is a locked LUKS2 container and cannot be opened" {
		t.Errorf("Why = %q, want the agent's sentence", x.Why)
	}
	if len(x.Next) == 0 || !strings.Contains(x.Next[0].Text, "newer") {
		t.Errorf("Next = %+v, want advice that the agent is newer than the console", x.Next)
	}
}

func TestCondition(t *testing.T) {
	types := apiConstants(t, "", "Condition")
	for _, c := range types {
		if !slices.Contains(explain.ConditionTypes(), c) {
			t.Errorf("condition type %s from the API has no explanation", c)
		}
	}
	tests := []struct {
		name, typ, message string
		wantKnown          bool
		wantWhy            string
	}{
		{"known type quotes the message", "VolumeGroupsHealthy", "vg1: /dev/nvme1n1 was not found", true, `"vg1: /dev/nvme1n1 was not found"`},
		{"unknown type shows the message", "FancyNewCondition", "something broke", false, "something broke"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			x := explain.Condition(tc.typ, "Reason", tc.message, explain.Context{Node: "n"})
			if (x.Title != tc.typ+" is not true") != tc.wantKnown {
				t.Errorf("title %q: known = %v, want %v", x.Title, !tc.wantKnown, tc.wantKnown)
			}
			if !strings.Contains(x.Why, tc.wantWhy) {
				t.Errorf("Why = %q, want it to contain %q", x.Why, tc.wantWhy)
			}
			if len(x.Next) == 0 {
				t.Error("no next step")
			}
		})
	}
}

func TestThinUsage(t *testing.T) {
	tests := []struct {
		kind           string
		pct, threshold float64
		wantOK         bool
		wantSev        explain.Severity
	}{
		{"metadata", 64.9, 75, false, ""},
		{"metadata", 65, 75, true, explain.Warning},
		{"metadata", 75, 75, true, explain.Error},
		{"data", 79.9, 90, false, ""},
		{"data", 80, 90, true, explain.Warning},
		{"data", 89.9, 90, true, explain.Warning},
		{"data", 95, 90, true, explain.Error},
		{"data", 55, 60, true, explain.Warning}, // a class's own, lower threshold
		{"data", 60, 60, true, explain.Error},
		{"data", 85, 100, false, ""},
	}
	for _, tc := range tests {
		x, ok := explain.ThinUsageAt(tc.kind, tc.pct, tc.threshold, explain.Context{VolumeGroup: "vg1"})
		if ok != tc.wantOK || x.Severity != tc.wantSev {
			t.Errorf("ThinUsage(%s, %v, %v) = %v %q, want %v %q", tc.kind, tc.pct, tc.threshold, ok, x.Severity, tc.wantOK, tc.wantSev)
		}
		if ok && !strings.Contains(x.Why, fmt.Sprintf("%s is %.1f%% full", tc.kind, tc.pct)) {
			t.Errorf("Why %q does not name %s and its use", x.Why, tc.kind)
		}
	}
	if explain.ThinThreshold("data", 0) != 90 || explain.ThinThreshold("metadata", 0) != 75 || explain.ThinThreshold("data", 60) != 60 {
		t.Errorf("defaults and reported thresholds are not used")
	}
}
