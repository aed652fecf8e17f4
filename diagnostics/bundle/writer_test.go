package bundle

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	lvmv2 "github.com/lvms-dev/lvms/api/lvm/v2alpha1"
	"github.com/lvms-dev/lvms/nodeagent/diagnostics"
)

var at = time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)

// writeSample writes a small bundle with w.
func writeSample(t testing.TB, w *Writer) {
	t.Helper()
	m, _ := json.Marshal(Manifest{Format: FormatVersion, Product: Product, Version: "v1", Started: at, Cluster: "test", Installed: true})
	view := &diagnostics.View{APIVersion: diagnostics.ViewAPIVersion, Node: "worker-a", Version: "v1", Time: at.Add(3 * time.Second),
		Lsblk: json.RawMessage(`{"blockdevices":[{"name":"/dev/sdb"}]}`), FullReport: json.RawMessage(`{"report":[]}`),
		LVMD:     &diagnostics.LVMDFile{Path: "/etc/topolvm/lvmd.yaml", Exists: true, Content: "device-classes: []\n"},
		Verdicts: []diagnostics.VolumeGroupVerdicts{{Name: "vg1", Devices: []diagnostics.DeviceVerdict{{KName: "/dev/sdb", Verdict: diagnostics.VerdictExcluded, Reasons: []diagnostics.Reason{{Code: "Mounted", Message: "mounted"}}}}}}}
	nodeFiles, err := NodeFiles(view, "lvms/agent-x", at, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	files := map[string]string{
		"cluster-scoped-resources/core/nodes/worker-a.yaml":                             "apiVersion: v1\nkind: Node\nmetadata:\n  name: worker-a\n",
		"namespaces/lvms/lvm.topolvm.io/lvmnodes/worker-a.yaml":                         "apiVersion: lvm.topolvm.io/v2alpha1\nkind: LVMNode\nmetadata:\n  name: worker-a\n  namespace: lvms\nstatus:\n  state: Degraded\n",
		"cluster-scoped-resources/snapshot.storage.k8s.io/volumesnapshotclasses/x.yaml": "apiVersion: snapshot.storage.k8s.io/v1\nkind: VolumeSnapshotClass\nmetadata:\n  name: x\ndriver: topolvm.io\ndeletionPolicy: Delete\n",
		"namespaces/lvms/core/events.yaml":                                              "apiVersion: v1\nkind: List\nitems:\n- apiVersion: v1\n  kind: Event\n  metadata:\n    name: e1\n    namespace: lvms\n  reason: Boom\n",
		"namespaces/lvms/pods/agent-x/node-agent/node-agent/logs/current.log":           "log line\n",
		"namespaces/lvms/core/configmaps/broken.yaml":                                   "kind: [",
	}
	for _, name := range sortedKeys(files) {
		if err := w.WriteFile(name, []byte(files[name])); err != nil {
			t.Fatal(err)
		}
	}
	for _, f := range sortedKeys(nodeFiles) {
		p, _ := NodePath("worker-a", f)
		if err := w.WriteFile(p, nodeFiles[f]); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.WriteMeta(FileVersion, VersionFile("v1")); err != nil {
		t.Fatal(err)
	}
	if err := w.WriteMeta(FileManifest, m); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
}

func checkSample(t *testing.T, b *Bundle) {
	t.Helper()
	if b.Version != "v1" || b.Manifest.Cluster != "test" {
		t.Errorf("version %q manifest %+v", b.Version, b.Manifest)
	}
	if len(b.Problems) != 1 {
		t.Errorf("problems = %v, want the broken ConfigMap only", b.Problems)
	}
	s := b.Snapshot()
	if len(s.Nodes) != 1 || len(s.LVMNodes) != 1 || s.LVMNodes[0].Status.State != lvmv2.StateDegraded || len(s.Events) != 1 ||
		len(s.SnapshotClasses) != 1 || s.SnapshotClasses[0].Driver != "topolvm.io" || !s.At.Equal(at) || !s.Installed {
		t.Errorf("snapshot = %+v", s)
	}
	if _, ok := b.Objects[0].(*corev1.Node); !ok {
		t.Errorf("first object %T, want a typed Node", b.Objects[0])
	}
	st := b.Nodes["worker-a"]
	if st == nil || st.Record.Pod != "lvms/agent-x" || st.Record.ClockSkew(0) != 2500*time.Millisecond || st.Record.ClockSkew(5*time.Second) != -1500*time.Millisecond ||
		st.View.LVMD.Content != "device-classes: []\n" || len(st.View.Verdicts) != 1 || st.View.Verdicts[0].Devices[0].Reasons[0].Code != "Mounted" ||
		!bytes.Contains(st.View.Lsblk, []byte("/dev/sdb")) {
		t.Errorf("node state = %+v", st)
	}
}

func TestWriter_RoundTrip(t *testing.T) {
	t.Run("tar.gz", func(t *testing.T) {
		p := filepath.Join(t.TempDir(), "b.tar.gz")
		f, err := os.Create(p)
		if err != nil {
			t.Fatal(err)
		}
		w, err := NewTarWriter(f, "lvms-bundle-test", 0, at)
		if err != nil {
			t.Fatal(err)
		}
		writeSample(t, w)
		if err := f.Close(); err != nil {
			t.Fatal(err)
		}
		b, err := Load(p, Limits{})
		if err != nil {
			t.Fatal(err)
		}
		checkSample(t, b)
	})
	t.Run("must-gather directory", func(t *testing.T) {
		dir := t.TempDir()
		w, err := NewDirWriter(dir, 0, at)
		if err != nil {
			t.Fatal(err)
		}
		writeSample(t, w)
		b, err := Load(dir, Limits{})
		if err != nil {
			t.Fatal(err)
		}
		checkSample(t, b)
	})
}

func TestWriter_SizeLimitAndNames(t *testing.T) {
	w, err := NewTarWriter(&bytes.Buffer{}, "r", 10, at)
	if err != nil {
		t.Fatal(err)
	}
	if err := w.WriteFile("a", []byte("12345678")); err != nil {
		t.Fatal(err)
	}
	if err := w.WriteFile("b", []byte("123")); !errors.Is(err, ErrSizeLimit) {
		t.Errorf("past the limit: %v", err)
	}
	if err := w.WriteFile("c", []byte("12")); err != nil {
		t.Errorf("a file that still fits: %v", err)
	}
	if err := w.WriteMeta(FileManifest, bytes.Repeat([]byte("m"), 100)); err != nil {
		t.Errorf("metadata is not counted: %v", err)
	}
	for _, bad := range []string{"../x", "/abs", "a/../../b", "", "a//b", "./a"} {
		if err := w.WriteFile(bad, nil); err == nil {
			t.Errorf("WriteFile(%q) accepted", bad)
		}
	}
	if err := w.WriteFile("a", nil); err == nil {
		t.Error("a file written twice")
	}
	if _, err := NewTarWriter(&bytes.Buffer{}, "../r", 0, at); err == nil {
		t.Error("a root outside accepted")
	}
	for _, bad := range [][]string{{"", "x"}, {"a/b", "x"}, {"..", "x"}} {
		if _, err := ObjectPath("g", "r", bad[0], bad[1]); bad[0] != "" && err == nil {
			t.Errorf("ObjectPath with namespace %q accepted", bad[0])
		}
	}
	if p, err := ObjectPath("", "nodes", "", "n1"); err != nil || p != "cluster-scoped-resources/core/nodes/n1.yaml" {
		t.Errorf("ObjectPath = %q %v", p, err)
	}
}
