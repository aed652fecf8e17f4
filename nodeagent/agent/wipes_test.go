package agent

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/lvms-dev/lvms/nodeagent/desired"
)

// The node's copy of the wipe records outlives the API object: with the LVMNode (and its annotation) gone
// and made again, a device wiped once still counts as wiped.
func TestWipes_NodeCopySurvivesTheAPIObject(t *testing.T) {
	file := filepath.Join(t.TempDir(), "lvms-wipes.json")
	at := time.Date(2031, 2, 3, 4, 5, 6, 0, time.UTC)
	w := &apiWipes{a: &Agent{opts: Options{WipeRecordFile: file}}, in: &inputs{desired: &desired.Node{}}}
	// No API object holds vg1 (as after the LVMNode was deleted): the node's copy is still written first,
	// and the missing object is the error.
	if err := w.Begin(context.Background(), "vg1", "/dev/disk/by-id/wwn-1", at); err == nil || !strings.Contains(err.Error(), "no API object") {
		t.Fatalf("Begin without an API object: %v", err)
	}
	rec, ok, err := w.Wiped("vg1", "/dev/disk/by-id/wwn-1")
	if err != nil || !ok || rec.Done || !rec.At.Equal(at) {
		t.Fatalf("Wiped = %+v, %v, %v; want the begun wipe from the node's copy", rec, ok, err)
	}
	if _, ok, err := w.Wiped("vg1", "/dev/disk/by-id/other"); ok || err != nil {
		t.Errorf("another device: %v, %v", ok, err)
	}
}

// Records that cannot be read stop wipes instead of reading as "never wiped".
func TestWipes_UnreadableRecordsFailClosed(t *testing.T) {
	for name, content := range map[string]string{
		"not JSON":          "{",
		"not an object":     `["vg1"]`,
		"a record garbled":  `{"vg1": "{\"/dev/disk/by-id/wwn-1\": \"yesterday\"}"}`,
		"a record not JSON": `{"vg1": "nope"}`,
	} {
		t.Run(name, func(t *testing.T) {
			file := filepath.Join(t.TempDir(), "lvms-wipes.json")
			if err := os.WriteFile(file, []byte(content), 0o600); err != nil {
				t.Fatal(err)
			}
			w := &apiWipes{a: &Agent{opts: Options{WipeRecordFile: file}}, in: &inputs{desired: &desired.Node{}}}
			if _, _, err := w.Wiped("vg1", "/dev/disk/by-id/wwn-1"); err == nil || !strings.Contains(err.Error(), file) {
				t.Errorf("Wiped: %v, want an error naming %s", err, file)
			}
		})
	}
	if _, err := parseRecords(`{"/dev/disk/by-id/wwn-1": "2031-02-03T04:05:06Z started"}`); err != nil {
		t.Errorf("a begun wipe does not parse: %v", err)
	}
}
