package collect_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"

	lvmv1 "github.com/lvms-dev/lvms/api/lvm/v1alpha1"
	lvmv2 "github.com/lvms-dev/lvms/api/lvm/v2alpha1"
	"github.com/lvms-dev/lvms/console"
	"github.com/lvms-dev/lvms/console/consoletest"
	"github.com/lvms-dev/lvms/console/live"
	"github.com/lvms-dev/lvms/diagnostics/analyze"
	"github.com/lvms-dev/lvms/diagnostics/bundle"
	"github.com/lvms-dev/lvms/diagnostics/bundletest"
	"github.com/lvms-dev/lvms/diagnostics/collect"
	"github.com/lvms-dev/lvms/e2e/testenv"
	"github.com/lvms-dev/lvms/migrate/record"
	"github.com/lvms-dev/lvms/operator/names"
	"github.com/lvms-dev/lvms/web"
)

var env *testenv.Env

func TestMain(m *testing.M) { os.Exit(testenv.Main(m, &env)) }

// The prepared state has cluster-scoped names (nodes, classes, LogicalVolumes), so it is written once per
// control plane into one namespace, with planted credentials. The test plays the operator, the node agents
// (their diagnostics endpoints are real, in process) and, for logs, the kubelet.
const preparedNS = "lvms-diag"

// clk is the one clock of the prepared state and of what reads it: the real one, because the API server that
// stores the state (and stamps what it creates) runs on it. Times in the state are relative to it, so the
// test gives the same verdict on any date.
var clk clock.PassiveClock = clock.RealClock{}

// staleReason marks an event older than the collection window.
const staleReason = "StaleForTest"

var (
	prepareOnce sync.Once
	prepareErr  error
	agentPods   []*corev1.Pod
)

func prepare(t *testing.T) {
	t.Helper()
	testenv.Require(t)
	prepareOnce.Do(func() {
		ctx := context.Background()
		c := env.Client
		if prepareErr = c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: preparedNS}}); prepareErr != nil {
			return
		}
		objs := consoletest.PreparedAt(preparedNS, clk.Now())
		for _, o := range objs {
			switch o := o.(type) {
			case *lvmv2.LVMNodeSet:
				o.Annotations = map[string]string{"note": "debug with curl -H 'Authorization: Bearer " + plantedBearer + "'"}
			case *lvmv1.LVMCluster:
				o.Annotations = map[string]string{names.KeepStorageOnDeleteAnnotation: "true", names.MigrationStateAnnotation: halfWayRecord}
			}
		}
		if prepareErr = consoletest.Apply(ctx, c, objs); prepareErr != nil {
			return
		}
		plants := []client.Object{
			&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "db", Namespace: preparedNS}, StringData: map[string]string{"password": plantedSecret}},
			&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "admin-kubeconfig", Namespace: preparedNS}, Data: map[string]string{"kubeconfig": "apiVersion: v1\nkind: Config\n" +
				"users:\n- name: admin\n  user:\n    token: " + plantedKubeToken + "\n    client-key-data: " + plantedClientKey + "\n"}},
			&corev1.Event{ObjectMeta: metav1.ObjectMeta{Name: "leak", Namespace: preparedNS}, Type: corev1.EventTypeWarning, Reason: "Debug",
				InvolvedObject: corev1.ObjectReference{APIVersion: "v1", Kind: "Pod", Namespace: preparedNS, Name: "lvms-node-agent-worker-a"},
				Message:        "retrying with token " + plantedJWT, LastTimestamp: metav1.NewTime(clk.Now())},
			&corev1.Event{ObjectMeta: metav1.ObjectMeta{Name: "stale", Namespace: preparedNS}, Type: corev1.EventTypeNormal, Reason: staleReason,
				InvolvedObject: corev1.ObjectReference{APIVersion: "lvm.topolvm.io/v2alpha1", Kind: "LVMNode", Namespace: preparedNS, Name: consoletest.NodeA},
				Message:        "older than the collection window", LastTimestamp: metav1.NewTime(clk.Now().Add(-3 * time.Hour))},
			// A capacity of an LVMS class: collected once (the sandbox's bundle once failed writing it twice).
			&storagev1.CSIStorageCapacity{ObjectMeta: metav1.ObjectMeta{Name: "topolvm-fast-a", Namespace: preparedNS}, StorageClassName: "lvms-fast",
				Capacity: resource.NewQuantity(10<<30, resource.BinarySI)},
		}
		for _, o := range plants {
			if prepareErr = c.Create(ctx, o); prepareErr != nil {
				return
			}
		}
	})
	if prepareErr != nil {
		t.Fatalf("write the prepared state: %v", prepareErr)
	}
}

// halfWayRecord is a migration of the prepared LVMCluster stopped at its first step: the bundle must carry
// it as written, so that the analysis reports it.
var halfWayRecord = func() string {
	r := record.Record{Version: record.Version, Cluster: "legacy", Step: record.StepMarked, Started: time.Date(2025, 3, 1, 10, 0, 0, 0, time.UTC),
		Sets: []string{"legacy-worker-c"}, Nodes: []string{consoletest.NodeC},
		Before: record.Snapshot{Nodes: []record.NodeStorage{{Name: consoletest.NodeC, VolumeGroups: []record.VolumeGroup{{Name: "legacy", Devices: []string{"/dev/sdb"}}}}},
			StorageClasses: []record.Class{{Name: "lvms-legacy", UID: "uid-sc", Provisioner: "topolvm.io", Parameters: map[string]string{"topolvm.io/device-class": "legacy"}}}}}
	v, err := r.Encode()
	if err != nil {
		panic(err)
	}
	return v
}()

// makeGatherer creates a service account that may read the agents' diagnostics, as must-gather's would.
func makeGatherer(ctx context.Context, e *testenv.Env, ns, name string) error {
	rules := []rbacv1.PolicyRule{{APIGroups: []string{"lvm.topolvm.io"}, Resources: []string{"lvmnodes/diagnostics"}, Verbs: []string{"get"}}}
	if _, err := consoletest.UserToken(ctx, e.Config, e.Client, ns, name, rules); err != nil && !strings.Contains(err.Error(), "already exists") {
		return err
	}
	return nil
}

func gathererToken(t *testing.T, ctx context.Context) string {
	t.Helper()
	testenv.Require(t)
	if err := makeGatherer(ctx, env, preparedNS, "gatherer"); err != nil {
		t.Fatal(err)
	}
	return preparedNS + "/gatherer"
}

func startAgentsOnce(t *testing.T, ctx context.Context) {
	t.Helper()
	testenv.Require(t)
	if agentPods != nil {
		return
	}
	cs := kubernetes.NewForConfigOrDie(env.Config)
	ip := hostIP(t)
	for _, n := range []string{consoletest.NodeA, consoletest.NodeB, consoletest.NodeC} {
		agentPods = append(agentPods, startAgent(t, ctx, cs, ip, preparedNS, n))
	}
}

// TestBundle_PreparedCluster is the acceptance path: `lvms bundle` against a cluster whose node agents
// serve their diagnostics, through the API server's pod proxy with a minted, audience-bound token.
func TestBundle_PreparedCluster(t *testing.T) {
	testenv.Require(t)
	prepare(t)
	ctx := context.Background()
	startAgentsOnce(t, ctx)
	// The window holds every event of the prepared state (the oldest is an hour old), so the console from the
	// bundle shows what the live one shows.
	opts := collect.Options{Config: env.Config, Cluster: "envtest", Version: "v-test", AgentServiceAccount: gathererToken(t, ctx),
		Logs: fakeLogs{}, Since: clk.Now().Add(-2 * time.Hour), Clock: clk}
	path, sum := collectTo(t, ctx, opts)

	t.Run("layout", func(t *testing.T) {
		_, names := tarContents(t, path)
		root := names[0]
		for _, want := range []string{
			"version", "manifest.json", "analysis.json", "redactions.json",
			"cluster-scoped-resources/core/nodes/worker-a.yaml",
			"cluster-scoped-resources/storage.k8s.io/storageclasses/lvms-fast.yaml",
			"cluster-scoped-resources/topolvm.io/logicalvolumes/",
			"cluster-scoped-resources/core/persistentvolumes/",
			"namespaces/" + preparedNS + "/lvm.topolvm.io/lvmnodesets/fast.yaml",
			"namespaces/" + preparedNS + "/lvm.topolvm.io/lvmnodes/worker-b.yaml",
			"namespaces/" + preparedNS + "/lvm.topolvm.io/lvmclusters/legacy.yaml",
			"namespaces/" + preparedNS + "/lvm.topolvm.io/lvmvolumegroupnodestatuses/worker-c.yaml",
			"namespaces/" + preparedNS + "/core/events.yaml",
			"namespaces/" + preparedNS + "/core/pods/lvms-node-agent-worker-a.yaml",
			"namespaces/" + preparedNS + "/pods/lvms-node-agent-worker-a/node-agent/node-agent/logs/current.log",
			"nodes/worker-a/lsblk.json", "nodes/worker-a/lvm-fullreport.json", "nodes/worker-a/lvmd.yaml",
			"nodes/worker-a/device-verdicts.json", "nodes/worker-a/agent.json",
			// What `lvms bundle serve` answers kubectl with: discovery, the server's tables, the namespaces.
			"discovery.json", "tables/core/nodes.json", "tables/lvm.topolvm.io/lvmnodes.json", "tables/core/events.json",
			"cluster-scoped-resources/core/namespaces/" + preparedNS + ".yaml",
		} {
			if !slices.ContainsFunc(names, func(n string) bool { return strings.HasPrefix(n, root+want) }) {
				t.Errorf("the bundle has no %s", want)
			}
		}
		if !strings.HasPrefix(root, "lvms-bundle-") {
			t.Errorf("root directory %q", root)
		}
		for _, n := range names {
			if strings.Contains(n, "/secrets/") {
				t.Errorf("a Secret was collected: %s", n)
			}
		}
	})

	b, err := bundle.Load(path, bundle.Limits{})
	if err != nil {
		t.Fatal(err)
	}
	t.Run("manifest", func(t *testing.T) {
		m := b.Manifest
		if m.Format != bundle.FormatVersion || m.Version != "v-test" || m.Cluster != "envtest" || !m.Installed || m.User == "" ||
			!slices.Contains(m.Namespaces, preparedNS) || m.Options.AgentAccess != collect.AccessProxy {
			t.Errorf("manifest = %+v", m)
		}
		for _, c := range m.Collectors {
			if c.Error != "" {
				t.Errorf("collector %s failed: %s", c.Name, c.Error)
			}
		}
		if off := m.ServerClockOffset; off == nil || *off > time.Second || *off < -time.Second {
			t.Errorf("API server clock offset = %v, want measured and within a second (same machine)", off)
		}
		if !slices.ContainsFunc(m.Hidden, func(h console.HiddenKind) bool { return h.Resource == "volumesnapshotclasses.snapshot.storage.k8s.io" }) {
			t.Errorf("hidden = %+v, want VolumeSnapshotClasses as not served", m.Hidden)
		}
	})
	t.Run("events inside the window only", func(t *testing.T) {
		events, _ := b.Files.Get("namespaces/" + preparedNS + "/core/events.yaml")
		if !bytes.Contains(events, []byte("DevicePathCheckFailed")) || bytes.Contains(events, []byte(staleReason)) {
			t.Errorf("events.yaml must hold the events of the last two hours and not the one of three hours ago:\n%s", events)
		}
	})
	t.Run("agent views through the endpoint", func(t *testing.T) {
		for _, n := range []string{consoletest.NodeA, consoletest.NodeB, consoletest.NodeC} {
			st := b.Nodes[n]
			if st == nil {
				t.Fatalf("no view of %s", n)
			}
			if st.Record.Version != "v-test" || !bytes.Contains(st.View.FullReport, []byte("thin-pool")) || st.View.LVMD == nil || st.View.LVMD.Invalid != "" ||
				len(st.View.Verdicts) != 1 || len(st.View.Errors) != 0 {
				t.Errorf("%s: record %+v view errors %+v verdicts %+v", n, st.Record, st.View.Errors, st.View.Verdicts)
			}
		}
	})
	t.Run("analysis finds the Degraded node and its cause", func(t *testing.T) {
		fs := analyze.Run(b)
		i := slices.IndexFunc(fs, func(f analyze.Finding) bool {
			return f.CheckName == analyze.CheckNodeNotReady && f.Node == consoletest.NodeB
		})
		if i < 0 {
			t.Fatalf("no NodeNotReady finding for worker-b")
		}
		f := fs[i]
		if f.Severity != analyze.Fail || !slices.Equal(f.Codes, []string{"NotFound"}) || f.Device != consoletest.MissingDevice ||
			!strings.Contains(f.Message, "worker-b is Degraded") {
			t.Errorf("worker-b finding = %+v, want fail with cause NotFound on %s", f, consoletest.MissingDevice)
		}
		var doc analyze.Document
		raw, _ := b.Files.Get(bundle.FileAnalysis)
		if err := json.Unmarshal(raw, &doc); err != nil || !slices.ContainsFunc(doc.Findings, func(x analyze.Finding) bool {
			return x.CheckName == analyze.CheckNodeNotReady && x.Node == consoletest.NodeB
		}) {
			t.Errorf("analysis.json (%v) lacks the worker-b finding", err)
		}
		if len(sum.Findings) == 0 {
			t.Error("the summary has no findings")
		}
	})
	t.Run("analysis reports the migration left half-way", func(t *testing.T) {
		cl := b.Find("lvm.topolvm.io", "LVMCluster")
		i := slices.IndexFunc(cl, func(c client.Object) bool { return c.GetName() == "legacy" })
		if i < 0 || cl[i].GetAnnotations()[names.MigrationStateAnnotation] != halfWayRecord {
			t.Fatalf("the bundle does not carry the LVMCluster's migration record as written")
		}
		if !slices.ContainsFunc(analyze.Run(b), func(f analyze.Finding) bool {
			return f.CheckName == analyze.CheckMigration && f.Severity == analyze.Warn && strings.Contains(f.Message, "stopped at step Marked") &&
				strings.Contains(f.Message, "Still with the LVMCluster: "+consoletest.NodeC)
		}) {
			t.Error("no MigrationIncomplete warning for the LVMCluster's half-way migration")
		}
	})
	t.Run("planted credentials never appear", func(t *testing.T) {
		all, _ := tarContents(t, path)
		for _, p := range planted() {
			if bytes.Contains(all, []byte(p)) {
				i := bytes.Index(all, []byte(p))
				t.Errorf("%q is in the bundle: ...%s...", p, all[max(0, i-200):min(len(all), i+50)])
			}
		}
		if sum.Redactions.Total == 0 || b.Redactions == nil || len(b.Redactions.Redactions) == 0 {
			t.Errorf("redaction report = %+v", sum.Redactions)
		}
	})
	t.Run("the console shows the same views as live", func(t *testing.T) {
		// The live console shows every event, the bundle those of its window: the stale one goes first.
		stale := &corev1.Event{ObjectMeta: metav1.ObjectMeta{Name: "stale", Namespace: preparedNS}}
		if err := env.Client.Delete(ctx, stale); err != nil {
			t.Fatal(err)
		}
		lctx, cancel := context.WithCancel(ctx)
		defer cancel() // stops the informers, so the API server can stop
		src := live.New(lctx, env.Config, live.Options{Cluster: "envtest", Clock: clk})
		liveSnap, err := src.Snapshot(lctx)
		if err != nil {
			t.Fatal(err)
		}
		bundleSnap, err := bundle.NewSource(b).Snapshot(ctx)
		if err != nil {
			t.Fatal(err)
		}
		compareViews(t, liveSnap, bundleSnap)
		pages := bundletest.ComparePages(t, src, bundle.NewSource(b), &web.Bundle{Name: path, At: b.Manifest.Started, Findings: analyze.Run(b)})
		if pages < 20 {
			t.Errorf("compared %d pages, want every page of the three nodes and their devices", pages)
		}
		t.Logf("%d console pages are the same live and from the bundle", pages)
	})
}

// compareViews renders every console view of both snapshots (at the same time) as JSON and compares them.
func compareViews(t *testing.T, liveSnap, bundleSnap *console.Snapshot) {
	t.Helper()
	l, b := *liveSnap, *bundleSnap
	b.At = l.At
	render := func(s *console.Snapshot) map[string]string {
		out := map[string]string{}
		put := func(name string, v any, err error) {
			if err != nil {
				out[name] = "error: " + err.Error()
				return
			}
			j, _ := json.MarshalIndent(v, "", " ")
			out[name] = string(j)
		}
		put("overview", console.BuildOverview(s), nil)
		put("volumes", console.Volumes(s), nil)
		put("classes", console.DeviceClasses(s), nil)
		put("events", console.Events(s), nil)
		for _, n := range []string{consoletest.NodeA, consoletest.NodeB, consoletest.NodeC} {
			v, err := console.Node(s, n)
			put("node "+n, v, err)
			if v != nil {
				for _, g := range v.VolumeGroups {
					for _, d := range g.Devices {
						dv, err := console.Device(s, n, d.KName)
						put("device "+n+" "+d.KName, dv, err)
					}
				}
			}
		}
		return out
	}
	lv, bv := render(&l), render(&b)
	for name, want := range lv {
		if got := bv[name]; got != want {
			t.Errorf("%s differs between live and bundle:\nlive:   %s\nbundle: %s", name, clip(want), clip(got))
		}
	}
	if len(lv) != len(bv) {
		t.Errorf("live renders %d views, the bundle %d", len(lv), len(bv))
	}
}

func clip(s string) string {
	if len(s) > 3000 {
		return s[:3000] + "..."
	}
	return s
}

// An API server that does not answer is one clear error naming it, before anything is written: no bundle
// that says "the cluster does not serve ..." for every resource.
func TestRun_UnreachableAPIServerIsOneError(t *testing.T) {
	var buf bytes.Buffer
	_, err := collect.WriteTarGz(context.Background(), collect.Options{Config: &rest.Config{Host: "https://127.0.0.1:1"}, Cluster: "gone"}, &buf)
	var ue *collect.UnreachableError
	if !errors.As(err, &ue) || !strings.Contains(err.Error(), "cannot reach the API server at https://127.0.0.1:1") ||
		!strings.Contains(err.Error(), "connection refused") {
		t.Fatalf("err = %v, want one UnreachableError naming the server and the cause", err)
	}
	if buf.Len() != 0 {
		t.Errorf("%d bytes of bundle written for a cluster that never answered", buf.Len())
	}
}
