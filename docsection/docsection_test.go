package docsection

import (
	"strings"
	"testing"
)

func TestSplice_ReplacesOnlyBetweenTheMarkers(t *testing.T) {
	doc := "intro\n<!-- a:begin -->\nold\ntable\n<!-- a:end -->\nrest\n"
	got, err := Splice([]byte(doc), "<!-- a:begin -->", "<!-- a:end -->", "new\n")
	if err != nil {
		t.Fatal(err)
	}
	if want := "intro\n<!-- a:begin -->\nnew\n<!-- a:end -->\nrest\n"; string(got) != want {
		t.Errorf("got %q, want %q", got, want)
	}
	again, err := Splice(got, "<!-- a:begin -->", "<!-- a:end -->", "new\n")
	if err != nil || string(again) != string(got) {
		t.Errorf("splicing the same section again changed the document: %q, %v", again, err)
	}
}

func TestSplice_MissingOrReversedMarkersAreAnError(t *testing.T) {
	for name, doc := range map[string]string{
		"no begin": "x\n<!-- a:end -->\n",
		"no end":   "<!-- a:begin -->\nx\n",
		"reversed": "<!-- a:end -->\nx\n<!-- a:begin -->\n",
	} {
		_, err := Splice([]byte(doc), "<!-- a:begin -->", "<!-- a:end -->", "y\n")
		if err == nil || !strings.Contains(err.Error(), "<!-- a:begin -->") {
			t.Errorf("%s: error %v, want one naming the markers", name, err)
		}
	}
}
