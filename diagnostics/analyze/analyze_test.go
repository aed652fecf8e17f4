package analyze_test

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	lvmv1 "github.com/lvms-dev/lvms/api/lvm/v1alpha1"
	lvmv2 "github.com/lvms-dev/lvms/api/lvm/v2alpha1"
	topolvmv1 "github.com/lvms-dev/lvms/api/topolvm/v1"
	"github.com/lvms-dev/lvms/console/explain"
	"github.com/lvms-dev/lvms/diagnostics/analyze"
	"github.com/lvms-dev/lvms/diagnostics/bundle"
	"github.com/lvms-dev/lvms/diagnostics/bundletest"
	"github.com/lvms-dev/lvms/nodeagent/diagnostics"
)

var update = flag.Bool("update", false, "rewrite the golden files")

// want is a finding a broken bundle must produce.
type want struct {
	check    string
	severity analyze.Severity
	node     string
	// contains must all appear in the finding's message.
	contains []string
}

func node(s *bundletest.State, name string) *lvmv2.LVMNode {
	return bundletest.Find[*lvmv2.LVMNode](s, name)
}

func vg(s *bundletest.State, name string) *lvmv2.VolumeGroupStatus {
	return &node(s, name).Status.VolumeGroups[0]
}

func exclude(s *bundletest.State, nodeName, kname string, codes ...string) {
	var reasons []string
	for _, c := range codes {
		reasons = append(reasons, kname+" is excluded for "+c)
	}
	g := vg(s, nodeName)
	g.Devices.Excluded = append(g.Devices.Excluded, lvmv2.ExcludedDevice{KName: kname, Reasons: reasons, ReasonCodes: codes})
}

func degrade(s *bundletest.State, nodeName, msg string) {
	n := node(s, nodeName)
	n.Status.State, n.Status.Message = lvmv2.StateDegraded, msg
}

// brokenCase breaks the healthy bundle in one place; want are the findings that must appear.
type brokenCase struct {
	name   string
	break_ func(s *bundletest.State)
	want   []want
}

var cases = []brokenCase{
	{name: "required-path-missing", break_: func(s *bundletest.State) {
		n := node(s, bundletest.NodeB)
		n.Spec.VolumeGroups[0].DeviceSelector.DeviceSelectorTerms = []lvmv2.DeviceSelectorTerm{{MatchExpressions: []lvmv2.DeviceSelectorRequirement{
			{Key: lvmv2.KeyKName, Operator: lvmv2.OpIn, Values: []string{"/dev/sdb", "/dev/nvme1n1"}}}}}
		exclude(s, bundletest.NodeB, "/dev/nvme1n1", "NotFound")
		vg(s, bundletest.NodeB).State = lvmv2.StateDegraded
		degrade(s, bundletest.NodeB, "volume group vg1 is degraded: /dev/nvme1n1 was not found")
	}, want: []want{
		{analyze.CheckRequiredPath, analyze.Fail, bundletest.NodeB, []string{"/dev/nvme1n1", "does not exist on node worker-b"}},
		{analyze.CheckNodeNotReady, analyze.Fail, bundletest.NodeB, []string{"worker-b is Degraded", "Cause: Path not found on the node", "/dev/nvme1n1"}},
	}},
	{name: "required-path-missing-agent-verdict", break_: func(s *bundletest.State) {
		s.Views[bundletest.NodeB].Verdicts[0].MissingRequired = []string{"/dev/disk/by-id/wwn-0x5000"}
	}, want: []want{{analyze.CheckRequiredPath, analyze.Fail, bundletest.NodeB, []string{"/dev/disk/by-id/wwn-0x5000", "the node agent's own verdict"}}}},
	{name: "all-devices-excluded-agent-verdict", break_: func(s *bundletest.State) {
		v := &s.Views[bundletest.NodeB].Verdicts[0]
		v.Exists = false
		v.Devices[0] = diagnostics.DeviceVerdict{KName: "/dev/sdb", Verdict: diagnostics.VerdictExcluded, Reasons: []diagnostics.Reason{{Code: "Mounted", Message: "mounted"}}}
	}, want: []want{{analyze.CheckAllExcluded, analyze.Fail, bundletest.NodeB, []string{"does not exist on node worker-b", "/dev/sdb (Mounted)"}}}},
	{name: "all-devices-excluded", break_: func(s *bundletest.State) {
		g := vg(s, bundletest.NodeB)
		g.Devices.Included, g.State, g.Volumes = nil, lvmv2.StateFailed, nil
		exclude(s, bundletest.NodeB, "/dev/sdb", "Mounted", "ForeignSignature")
		exclude(s, bundletest.NodeB, "/dev/sdc", "ReadOnly")
		n := node(s, bundletest.NodeB)
		n.Status.State, n.Status.Message = lvmv2.StateFailed, "volume group vg1 has no usable device"
	}, want: []want{
		{analyze.CheckAllExcluded, analyze.Fail, bundletest.NodeB, []string{"vg1", "/dev/sdb (Mounted, ForeignSignature)", "/dev/sdc (ReadOnly)"}},
		{analyze.CheckNodeNotReady, analyze.Fail, bundletest.NodeB, []string{"worker-b is Failed"}},
	}},
	{name: "thin-pool-data-high", break_: func(s *bundletest.State) {
		vg(s, bundletest.NodeA).Volumes[0].DataPercent = "85.50"
	}, want: []want{{analyze.CheckThinPool, analyze.Warn, bundletest.NodeA, []string{"thin-pool", "85.5% full"}}}},
	{name: "thin-pool-metadata-full", break_: func(s *bundletest.State) {
		vg(s, bundletest.NodeA).Volumes[0].MetadataPercent = "95.00"
	}, want: []want{{analyze.CheckThinPool, analyze.Fail, bundletest.NodeA, []string{"metadata is 95.0% full"}}}},
	{name: "thin-pool-from-agent-report", break_: func(s *bundletest.State) {
		vg(s, bundletest.NodeA).Volumes = nil // only the agent's LVM report knows the pool
		s.Views[bundletest.NodeA].FullReport = []byte(bundletest.FullReport(bundletest.VG, bundletest.Pool, "91.00", "10.00"))
	}, want: []want{{analyze.CheckThinPool, analyze.Fail, bundletest.NodeA, []string{"from the agent's LVM report", "data is 91.0% full"}}}},
	{name: "volume-group-not-reported", break_: func(s *bundletest.State) {
		n := node(s, bundletest.NodeB)
		n.Status.VolumeGroups = nil
		degrade(s, bundletest.NodeB, "volume group vg1 could not be created")
	}, want: []want{{analyze.CheckVolumeGroupMissing, analyze.Fail, bundletest.NodeB, []string{"does not report it"}}}},
	{name: "volume-group-missing-state", break_: func(s *bundletest.State) {
		g := vg(s, bundletest.NodeB)
		g.State, g.Message = lvmv2.StateMissing, "vgs does not list vg1"
		degrade(s, bundletest.NodeB, "volume group vg1 is missing")
	}, want: []want{{analyze.CheckVolumeGroupMissing, analyze.Fail, bundletest.NodeB, []string{"vgs does not list vg1"}}}},
	{name: "agent-not-running", break_: func(s *bundletest.State) {
		bundletest.Remove[*corev1.Pod](s, "lvms-node-agent-"+bundletest.NodeB)
		delete(s.Views, bundletest.NodeB) // views are fetched through the agent pods
	}, want: []want{{analyze.CheckAgentNotReady, analyze.Fail, bundletest.NodeB, []string{"No node agent pod runs on node worker-b", "LVMNodeSet lvms/fast selects it"}}}},
	{name: "agent-not-ready", break_: func(s *bundletest.State) {
		p := bundletest.Find[*corev1.Pod](s, "lvms-node-agent-"+bundletest.NodeA)
		p.Status.Conditions[0].Status = corev1.ConditionFalse
		p.Status.ContainerStatuses[0] = corev1.ContainerStatus{Name: "node-agent", RestartCount: 7,
			State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "CrashLoopBackOff", Message: "back-off 5m0s"}}}
	}, want: []want{{analyze.CheckAgentNotReady, analyze.Fail, bundletest.NodeA, []string{"CrashLoopBackOff", "7 restarts"}}}},
	{name: "driver-not-registered", break_: func(s *bundletest.State) {
		bundletest.Find[*storagev1.CSINode](s, bundletest.NodeB).Spec.Drivers = nil
	}, want: []want{{analyze.CheckDriver, analyze.Fail, bundletest.NodeB, []string{"has not registered topolvm.io"}}}},
	{name: "csidriver-missing", break_: func(s *bundletest.State) {
		bundletest.Remove[*storagev1.CSIDriver](s, "topolvm.io")
	}, want: []want{{analyze.CheckDriver, analyze.Fail, "", []string{"There is no CSIDriver topolvm.io"}}}},
	{name: "pvc-pending-for-capacity", break_: func(s *bundletest.State) {
		s.Objects = append(s.Objects, &corev1.PersistentVolumeClaim{
			ObjectMeta: metav1.ObjectMeta{Name: "big", Namespace: "apps", CreationTimestamp: metav1.NewTime(bundletest.At.Add(-time.Minute)),
				Annotations: map[string]string{"volume.kubernetes.io/selected-node": bundletest.NodeA}},
			Spec: corev1.PersistentVolumeClaimSpec{StorageClassName: ptr.To(bundletest.Class),
				Resources: corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: *resourceGi(2000)}}},
			Status: corev1.PersistentVolumeClaimStatus{Phase: corev1.ClaimPending}},
			&corev1.Event{ObjectMeta: metav1.ObjectMeta{Name: "big.1", Namespace: "apps"}, Type: corev1.EventTypeWarning, Reason: "ProvisioningFailed",
				InvolvedObject: corev1.ObjectReference{Kind: "PersistentVolumeClaim", Namespace: "apps", Name: "big"},
				Message:        `Not enough space: 2000Gi requested in device class "fast" but node "worker-a" has only 900Gi free`,
				LastTimestamp:  metav1.NewTime(bundletest.At.Add(-30 * time.Second))})
	}, want: []want{{analyze.CheckPVCCapacity, analyze.Fail, bundletest.NodeA, []string{"apps/big", "Not enough space"}}}},
	{name: "pvc-pending-selected-node-full", break_: func(s *bundletest.State) {
		s.Objects = append(s.Objects, &corev1.PersistentVolumeClaim{
			ObjectMeta: metav1.ObjectMeta{Name: "big", Namespace: "apps", Annotations: map[string]string{"volume.kubernetes.io/selected-node": bundletest.NodeB}},
			Spec: corev1.PersistentVolumeClaimSpec{StorageClassName: ptr.To(bundletest.Class),
				Resources: corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: *resourceGi(2000)}}},
			Status: corev1.PersistentVolumeClaimStatus{Phase: corev1.ClaimPending}})
	}, want: []want{{analyze.CheckPVCCapacity, analyze.Fail, bundletest.NodeB, []string{"the selected node worker-b has 900Gi free"}}}},
	{name: "logical-volume-not-created", break_: func(s *bundletest.State) {
		lv := bundletest.Find[*topolvmv1.LogicalVolume](s, "pvc-0001")
		lv.Status = topolvmv1.LogicalVolumeStatus{}
	}, want: []want{{analyze.CheckLogicalVolumeStuck, analyze.Fail, bundletest.NodeA, []string{"pvc-0001", "has not created its LV"}}}},
	{name: "logical-volume-stuck-deleting", break_: func(s *bundletest.State) {
		lv := bundletest.Find[*topolvmv1.LogicalVolume](s, "pvc-0001")
		lv.DeletionTimestamp = ptr.To(metav1.NewTime(bundletest.At.Add(-20 * time.Minute)))
		lv.Finalizers = []string{"topolvm.io/logicalvolume"}
	}, want: []want{{analyze.CheckLogicalVolumeStuck, analyze.Fail, bundletest.NodeA, []string{"deleted 20m0s ago", "topolvm.io/logicalvolume"}}}},
	{name: "logical-volume-failed", break_: func(s *bundletest.State) {
		lv := bundletest.Find[*topolvmv1.LogicalVolume](s, "pvc-0001")
		lv.Status = topolvmv1.LogicalVolumeStatus{Code: 8, Message: "no enough space left on VG: free=0, requested=10737418240"}
	}, want: []want{{analyze.CheckLogicalVolumeStuck, analyze.Fail, bundletest.NodeA, []string{"no enough space left on VG"}}}},
	{name: "conflicting-nodesets", break_: func(s *bundletest.State) {
		other := bundletest.Find[*lvmv2.LVMNodeSet](s, bundletest.Set).DeepCopy()
		other.Name, other.UID, other.CreationTimestamp = "zz-other", "uid-other", metav1.NewTime(bundletest.At.Add(-time.Hour))
		other.Spec.Template.DeviceClasses[0].Name = "other"
		s.Objects = append(s.Objects, other)
	}, want: []want{{analyze.CheckConflictingSets, analyze.Fail, bundletest.NodeA, []string{"LVMNodeSet lvms/zz-other", "volume group vg1"}}}},
	{name: "v1-v2-double-management", break_: func(s *bundletest.State) {
		s.Objects = append(s.Objects, &lvmv1.LVMCluster{ObjectMeta: metav1.ObjectMeta{Name: "legacy", Namespace: bundletest.Namespace,
			CreationTimestamp: metav1.NewTime(bundletest.At.Add(-time.Hour))},
			Spec: lvmv1.LVMClusterSpec{Storage: lvmv1.Storage{DeviceClasses: []lvmv1.DeviceClass{{Name: "legacy", Default: true}}}}})
	}, want: []want{{analyze.CheckDoubleManagement, analyze.Fail, bundletest.NodeA, []string{"LVMCluster legacy (v1alpha1) both claim node worker-a"}}}},
	{name: "lvmd-invalid", break_: func(s *bundletest.State) {
		s.Views[bundletest.NodeB].LVMD = &diagnostics.LVMDFile{Path: "/etc/topolvm/lvmd.yaml", Exists: true, Content: "device-classes: []\n",
			Invalid: "device-classes is empty: lvmd needs at least one device class"}
	}, want: []want{{analyze.CheckLVMD, analyze.Fail, bundletest.NodeB, []string{"is not valid lvmd.yaml", "device-classes is empty"}}}},
	{name: "lvmd-names-missing-pool", break_: func(s *bundletest.State) {
		s.Views[bundletest.NodeB].FullReport = []byte(bundletest.FullReport(bundletest.VG, "other-pool", "1.00", "1.00"))
	}, want: []want{{analyze.CheckLVMD, analyze.Fail, bundletest.NodeB, []string{"thin pool vg1/thin-pool, which does not exist"}}}},
	{name: "clock-skew", break_: func(s *bundletest.State) {
		s.Views[bundletest.NodeB].Time = bundletest.At.Add(7 * time.Minute)
	}, want: []want{{analyze.CheckSkew, analyze.Fail, bundletest.NodeB, []string{"7m0s ahead of the collector's"}}}},
	{name: "clock-skew-against-the-api-server", break_: func(s *bundletest.State) {
		off := 10 * time.Minute // the API server is ten minutes ahead of the collector; worker-a agrees with the collector
		s.Manifest.ServerClockOffset = &off
		for _, n := range bundletest.Nodes {
			s.Views[n].Time = bundletest.At.Add(off)
		}
		s.Views[bundletest.NodeA].Time = bundletest.At
	}, want: []want{{analyze.CheckSkew, analyze.Fail, bundletest.NodeA, []string{"10m0s behind the API server's clock"}}}},
	{name: "version-skew", break_: func(s *bundletest.State) {
		p := bundletest.Find[*corev1.Pod](s, "lvms-node-agent-"+bundletest.NodeB)
		p.Spec.Containers[0].Image = "quay.io/lvms/lvms:v0.9.0"
		s.Views[bundletest.NodeB].Version = "v0.9.0"
	}, want: []want{
		{analyze.CheckSkew, analyze.Warn, "", []string{"quay.io/lvms/lvms:v0.9.0 (node agent on worker-b)", "operator pod lvms-operator-7d9f"}},
		{analyze.CheckSkew, analyze.Warn, "", []string{"v0.9.0 on worker-b", "v1.0.0 on worker-a"}},
	}},
	{name: "collector-failed", break_: func(s *bundletest.State) {
		s.Manifest.Collectors = []bundle.CollectorRun{{Name: "node-agent-pods"}, {Name: "resources/csinodes.storage.k8s.io"}, {Name: "resources/csidrivers.storage.k8s.io"},
			{Name: "node/worker-b", Error: "the node agent at 10.0.0.2:8443 answered 401 Unauthorized"}}
		s.Manifest.SizeLimitReached = true
	}, want: []want{
		{analyze.CheckCollection, analyze.Warn, "", []string{"node/worker-b failed", "401 Unauthorized"}},
		{analyze.CheckCollection, analyze.Warn, "", []string{"size limit"}},
	}},
}

func resourceGi(n int64) *resource.Quantity { return resource.NewQuantity(n<<30, resource.BinarySI) }

// TestRun_BrokenBundles breaks the healthy bundle in one place per case: the expected finding appears, with
// its object and message, and the printed findings match the golden file.
func TestRun_BrokenBundles(t *testing.T) {
	for _, tc := range slices.Concat(cases, migrationCases, sharedCases) {
		t.Run(tc.name, func(t *testing.T) {
			s := bundletest.Healthy()
			tc.break_(s)
			fs := analyze.Run(s.Bundle(t))
			for _, w := range tc.want {
				if !slices.ContainsFunc(fs, func(f analyze.Finding) bool { return matches(f, w) }) {
					t.Errorf("no %s %s finding on %q containing %q; got:\n%s", w.severity, w.check, w.node, w.contains, text(fs))
				}
			}
			golden(t, filepath.Join("testdata", tc.name+".golden"), text(fs))
		})
	}
}

// TestRun_DeviceExcludedForEveryReasonCode: a device excluded for each code the node agent produces is
// reported with that code, its explanation's title and a fix, at the explanation's severity.
func TestRun_DeviceExcludedForEveryReasonCode(t *testing.T) {
	var all strings.Builder
	for _, code := range explain.Codes() {
		if code == string(lvmv2.ReasonNotFound) {
			continue // a missing path is RequiredPathMissing, above
		}
		t.Run(code, func(t *testing.T) {
			s := bundletest.Healthy()
			exclude(s, bundletest.NodeA, "/dev/sdz", code)
			fs := analyze.Run(s.Bundle(t))
			x := explain.Reason(code, explain.Context{})
			i := slices.IndexFunc(fs, func(f analyze.Finding) bool {
				return f.CheckName == analyze.CheckDeviceExcluded && f.Device == "/dev/sdz"
			})
			if i < 0 {
				t.Fatalf("no DeviceExcluded finding for /dev/sdz:\n%s", text(fs))
			}
			f := fs[i]
			wantSev := map[explain.Severity]analyze.Severity{explain.Info: analyze.Pass, explain.Warning: analyze.Warn, explain.Error: analyze.Fail}[x.Severity]
			if !slices.Equal(f.Codes, []string{code}) || f.Severity != wantSev || f.Title != "Device excluded: "+x.Title || f.Fix == "" ||
				f.InvolvedObject == nil || f.InvolvedObject.Name != bundletest.NodeA || !strings.Contains(f.Message, "excluded for "+code) {
				t.Errorf("finding = %+v; want code %s, severity %s, title %q, a fix and the LVMNode", f, code, wantSev, x.Title)
			}
			if wantSev != analyze.Fail && slices.ContainsFunc(fs, func(f analyze.Finding) bool { return f.Severity == analyze.Fail }) {
				t.Errorf("an excluded %s device makes something fail:\n%s", code, text(fs))
			}
			all.WriteString(text([]analyze.Finding{f}))
		})
	}
	golden(t, filepath.Join("testdata", "device-excluded-every-code.golden"), all.String())
}

func TestRun_HealthyBundleHasNoFailOrWarn(t *testing.T) {
	fs := analyze.Run(bundletest.Healthy().Bundle(t))
	for _, f := range fs {
		if f.Severity != analyze.Pass {
			t.Errorf("healthy bundle: %s %s: %s", f.Severity, f.CheckName, f.Message)
		}
	}
	for _, c := range analyze.Checks() {
		if !slices.ContainsFunc(fs, func(f analyze.Finding) bool { return f.CheckName == c.Name }) {
			t.Errorf("check %s reported nothing, not even a pass", c.Name)
		}
	}
	golden(t, filepath.Join("testdata", "healthy.golden"), text(fs))
}

func TestMarshal_AnalysisJSON(t *testing.T) {
	s := bundletest.Healthy()
	degrade(s, bundletest.NodeB, "broken")
	fs := analyze.Run(s.Bundle(t))
	b, err := analyze.Marshal(fs)
	if err != nil {
		t.Fatal(err)
	}
	for _, key := range []string{`"format": 1`, `"summary"`, `"checkName": "NodeNotReady"`, `"severity": "fail"`, `"involvedObject"`, `"fix"`} {
		if !bytes.Contains(b, []byte(key)) {
			t.Errorf("analysis.json lacks %s:\n%s", key, b)
		}
	}
}

func matches(f analyze.Finding, w want) bool {
	if f.CheckName != w.check || f.Severity != w.severity || f.Node != w.node {
		return false
	}
	for _, c := range w.contains {
		if !strings.Contains(f.Message, c) {
			return false
		}
	}
	return f.Fix != ""
}

func text(fs []analyze.Finding) string {
	var b bytes.Buffer
	_ = analyze.WriteText(&b, fs, false)
	return b.String()
}

func golden(t *testing.T, path, got string) {
	t.Helper()
	if *update {
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test -update to create it)", err)
	}
	if string(want) != got {
		t.Errorf("%s differs (go test -update rewrites it):\n--- got\n%s\n--- want\n%s", path, got, want)
	}
}

// TestRun_SameVerdictOnAnyDate moves every broken bundle decades into the past and into the future and runs it
// through the tar.gz writer, the reader and the analyzers: the findings are those of the bundle as made, with
// only the times printed in them moved. Analyzers take "now" from the bundle, never from the wall clock.
func TestRun_SameVerdictOnAnyDate(t *testing.T) {
	dates := []time.Time{time.Date(1987, 2, 28, 23, 59, 59, 0, time.UTC), time.Date(2191, 12, 31, 23, 0, 0, 0, time.UTC)}
	for _, tc := range slices.Concat(cases, migrationCases, sharedCases) {
		t.Run(tc.name, func(t *testing.T) {
			want := findingsShifted(t, tc.break_, 0)
			for _, at := range dates {
				d := at.Sub(bundletest.At)
				got := unshiftTimes(findingsShifted(t, tc.break_, d), d)
				if got != want {
					t.Errorf("collected on %s, the findings differ from those of %s:\ngot:\n%s\nwant:\n%s", at.Format(time.DateOnly), bundletest.At.Format(time.DateOnly), got, want)
				}
			}
		})
	}
}

// findingsShifted breaks the healthy state, moves it by d, writes it as a tar.gz, reads it back and analyzes it.
func findingsShifted(t *testing.T, break_ func(*bundletest.State), d time.Duration) string {
	t.Helper()
	s := bundletest.Healthy()
	break_(s)
	bundletest.Shift(s, d)
	path := filepath.Join(t.TempDir(), "bundle.tar.gz")
	s.WriteTarGz(t, path)
	b, err := bundle.Load(path, bundle.Limits{})
	if err != nil {
		t.Fatal(err)
	}
	if !b.Manifest.Started.Equal(bundletest.At.Add(d)) {
		t.Fatalf("the bundle was collected at %s, want %s", b.Manifest.Started, bundletest.At.Add(d))
	}
	return text(analyze.Run(b))
}

var rfc3339 = regexp.MustCompile(`\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?(Z|[+-]\d\d:\d\d)`)

// unshiftTimes moves every RFC 3339 time printed in s back by d.
func unshiftTimes(s string, d time.Duration) string {
	return rfc3339.ReplaceAllStringFunc(s, func(m string) string {
		at, err := time.Parse(time.RFC3339Nano, m)
		if err != nil {
			return m
		}
		return at.Add(-d).UTC().Format(time.RFC3339)
	})
}

// A managed node whose LVMNode and LVMVolumeGroupNodeStatus both report LVMDConfigured False gets one
// finding, with advice for a managed node (the agent writes lvmd.yaml), not for host-owned files.
func TestRun_LVMDConfiguredOncePerNodeWithAdviceForItsMode(t *testing.T) {
	s := bundletest.Healthy()
	c := metav1.Condition{Type: lvmv2.ConditionLVMDConfigured, Status: metav1.ConditionFalse, Reason: "ClassWaiting",
		Message: "device class fast waits for thin pool thin-pool", LastTransitionTime: metav1.NewTime(bundletest.At)}
	meta.SetStatusCondition(&node(s, bundletest.NodeB).Status.Conditions, c)
	s.Objects = append(s.Objects, &lvmv1.LVMVolumeGroupNodeStatus{ObjectMeta: metav1.ObjectMeta{Name: bundletest.NodeB, Namespace: bundletest.Namespace},
		Status: lvmv1.LVMVolumeGroupNodeStatusStatus{Conditions: []metav1.Condition{c}}})
	var got []analyze.Finding
	for _, f := range analyze.Run(s.Bundle(t)) {
		if f.Node == bundletest.NodeB && slices.Contains(f.Codes, lvmv2.ConditionLVMDConfigured) {
			got = append(got, f)
		}
	}
	if len(got) != 1 {
		t.Fatalf("%d LVMDConfigured findings for %s, want 1:\n%s", len(got), bundletest.NodeB, text(got))
	}
	if strings.Contains(got[0].Fix, "ExternalConfiguration") || !strings.Contains(got[0].Fix, "node agent writes lvmd.yaml") {
		t.Errorf("advice for a managed node: %q", got[0].Fix)
	}
}

// Where no agent runs as a pod at all (the local sandbox runs them as processes) and a node's status
// describes its current spec, the agent is alive: a warning that says so, not a failure.
func TestRun_AgentsOutsidePodsAreJudgedByTheirReports(t *testing.T) {
	s := bundletest.Healthy()
	for _, n := range bundletest.Nodes {
		bundletest.Remove[*corev1.Pod](s, "lvms-node-agent-"+n)
		delete(s.Views, n)
	}
	var agentFindings []analyze.Finding
	for _, f := range analyze.Run(s.Bundle(t)) {
		if f.CheckName == analyze.CheckAgentNotReady && f.Severity != analyze.Pass {
			agentFindings = append(agentFindings, f)
		}
	}
	if len(agentFindings) != len(bundletest.Nodes) {
		t.Fatalf("findings:\n%s\nwant one per node", text(agentFindings))
	}
	for _, f := range agentFindings {
		if f.Severity != analyze.Warn || !strings.Contains(f.Message, "its status describes the current spec") {
			t.Errorf("%s: %s %q, want a warning citing the agent's report", f.Node, f.Severity, f.Message)
		}
	}
}
