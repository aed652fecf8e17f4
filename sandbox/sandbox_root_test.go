package sandbox

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	lvmv1 "github.com/lvms-dev/lvms/api/lvm/v1alpha1"
	lvmv2 "github.com/lvms-dev/lvms/api/lvm/v2alpha1"
	"github.com/lvms-dev/lvms/e2e/testenv"
	"github.com/lvms-dev/lvms/nodeagent/loopdev"
	"github.com/lvms-dev/lvms/nodeagent/lvm"
	"github.com/lvms-dev/lvms/operator"
)

// syncBuffer is an io.Writer safe for the sandbox goroutine and the test.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}
func (s *syncBuffer) String() string { s.mu.Lock(); defer s.mu.Unlock(); return s.b.String() }

// TestRun_ShowsReadyAndDegradedAndCleansUp runs the whole sandbox as `make run` does and checks what the
// acceptance asks: Ready and Degraded objects with readable reasons, then nothing left after Ctrl-C.
func TestRun_ShowsReadyAndDegradedAndCleansUp(t *testing.T) {
	loopdev.RequireRoot(t)
	state := t.TempDir()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	out := &syncBuffer{}
	ready := make(chan string, 1)
	done := make(chan error, 1)
	bin := testenv.BuildLVMS(t)
	go func() {
		done <- Run(ctx, Options{StateDir: state, Namespace: "openshift-storage", RepoRoot: testenv.RepoRoot(), Binary: bin, ConsoleAddr: "127.0.0.1:0", Out: out,
			Ready: func(kc string) { ready <- kc }})
	}()
	var kubeconfig string
	select {
	case kubeconfig = <-ready:
	case err := <-done:
		t.Fatalf("sandbox stopped before it was up: %v\n%s", err, out)
	case <-time.After(3 * time.Minute):
		t.Fatalf("sandbox not up after 3 minutes:\n%s", out)
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	c, err := client.New(cfg, client.Options{Scheme: operator.NewScheme()})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{
		"LVMNodeSet/volumes": "Ready", "LVMNodeSet/thin": "Degraded",
		"LVMNode/lvms-local-1": "Ready", "LVMNode/lvms-local-2": "Degraded", "LVMCluster/sandbox": "Ready",
	}
	deadline := time.Now().Add(2 * time.Minute)
	var rows []row
	for {
		rows, err = statusRows(ctx, c, "openshift-storage")
		if err != nil {
			t.Fatal(err)
		}
		got := map[string]string{}
		for _, r := range rows {
			got[r.kind+"/"+r.name] = r.state
		}
		match := len(got) == len(want)
		for k, v := range want {
			match = match && got[k] == v
		}
		if match {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("states = %v, want %v\n%s", got, want, out)
		}
		time.Sleep(500 * time.Millisecond)
	}
	for _, r := range rows {
		if r.state == "Degraded" && !strings.Contains(r.message, "thin pool pool cannot be created: device-mapper is not available") {
			t.Errorf("%s %s is Degraded with %q, want the missing device-mapper named", r.kind, r.name, r.message)
		}
	}
	var n lvmv2.LVMNode
	if err := c.Get(ctx, client.ObjectKey{Namespace: "openshift-storage", Name: "lvms-local-1"}, &n); err != nil {
		t.Fatal(err)
	}
	if ex := n.Status.VolumeGroups[0].Devices.Excluded; len(ex) != 1 || !strings.Contains(ex[0].Reasons[0], "ext4") {
		t.Errorf("node 1 excluded = %+v, want the ext4 disk with its reason", ex)
	}
	var cl lvmv1.LVMCluster
	if err := c.Get(ctx, client.ObjectKey{Namespace: "openshift-storage", Name: "sandbox"}, &cl); err != nil || !cl.Status.Ready {
		t.Errorf("LVMCluster sandbox = %+v (%v), want Ready", cl.Status, err)
	}
	checkClaimLifecycle(t, ctx, c, state)
	checkModeAndConsole(t, state, out.String())
	runWalkthrough(t, readmeBlock(t, "runs these lines as written against its own sandbox):\n\n", "simulated walkthrough"), state, bin, kubeconfig)
	// Five control plane components, the operator, three agents and the console: what must be gone after.
	if running := processesUnder(t, state); len(running) != 10 {
		t.Errorf("%d processes of the sandbox run, want 10:\n%s", len(running), strings.Join(running, "\n"))
	}

	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("sandbox: %v", err)
		}
	case <-time.After(3 * time.Minute):
		t.Fatalf("sandbox did not stop:\n%s", out)
	}
	if !strings.Contains(out.String(), "nothing left behind") {
		t.Errorf("the sandbox did not report a clean stop:\n%s", out)
	}
	if loops, err := loopsUnder(context.Background(), filepath.Join(state, "disks")); err != nil || len(loops) > 0 {
		t.Errorf("loop devices left: %v (%v)", loops, err)
	}
	for _, spec := range Topology() {
		if _, err := os.Stat(filepath.Join(state, "nodes", spec.Name, "lvm", "devices", devicesFile(state, spec.Name))); err == nil {
			t.Errorf("devices file of %s left behind", spec.Name)
		}
	}
	if _, err := os.Stat(KubeconfigPath(state)); err == nil {
		t.Errorf("kubeconfig of a stopped sandbox left behind")
	}
	if left := processesUnder(t, state); len(left) > 0 {
		t.Errorf("processes of the stopped sandbox still run: %v", left)
	}
}

// processesUnder lists the sandbox's programs, as "pid: command line".
func processesUnder(t *testing.T, dir string) []string {
	t.Helper()
	procs, err := Processes(dir)
	if err != nil {
		t.Fatal(err)
	}
	var found []string
	for _, p := range procs {
		found = append(found, strconv.Itoa(p.PID)+": "+strings.Join(p.Args, " "))
	}
	return found
}

// TestCleanUpPrevious_RemovesWhatACrashedRunLeft plays a sandbox that was killed: its loop device and a
// volume group on it are still there. The next start removes both.
func TestCleanUpPrevious_RemovesWhatACrashedRunLeft(t *testing.T) {
	loopdev.RequireRoot(t)
	ctx := context.Background()
	state := t.TempDir()
	s := &sandbox{opts: Options{StateDir: state, Out: &bytes.Buffer{}}, root: true}
	spec := Topology()[0]
	file := s.diskFile(spec.Name, "disk-a")
	disk, err := AttachDisk(ctx, file, DiskSpec{Name: "disk-a", Size: 256 << 20})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = DetachDisk(ctx, file) })
	sim, err := Node(state, spec.Name)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sim.CleanupLVM(ctx) })
	if err := sim.Runner.EnsureDevicesFile(ctx); err != nil {
		t.Fatal(err)
	}
	vg := loopdev.Prefix(t) + "crash"
	if err := sim.Runner.PVCreate(ctx, disk.Device); err != nil {
		t.Fatal(err)
	}
	if err := sim.Runner.VGCreate(ctx, vg, nil, []string{disk.Device}); err != nil {
		t.Fatal(err)
	}

	if err := s.cleanUpPrevious(ctx); err != nil {
		t.Fatal(err)
	}
	if loops, _ := loopsUnder(ctx, filepath.Join(state, "disks")); len(loops) != 0 {
		t.Errorf("loop devices left: %v", loops)
	}
	if _, err := os.Stat(sim.Runner.DevicesFilePath()); err == nil {
		t.Errorf("devices file left behind")
	}
	if _, err := os.Stat(file); err == nil {
		t.Errorf("disk file %s left behind", file)
	}
	if !strings.Contains(s.opts.Out.(*bytes.Buffer).String(), "Cleaned up after a previous run") {
		t.Errorf("the user was not told about the cleanup: %q", s.opts.Out.(*bytes.Buffer).String())
	}
}

// checkClaimLifecycle is what a user of the sandbox does first: a claim of the LVMCluster's class and a pod
// that uses it. The scheduler places the pod on node 3 (the only node of class vg1, by the capacity the
// operator publishes), the operator's provisioner has node 3's agent create the volume, and the claim is
// Bound to a PV on that node whose logical volume is in vg1's metadata. Deleting pod and claim removes the
// logical volume again.
func checkClaimLifecycle(t *testing.T, ctx context.Context, c client.Client, state string) {
	t.Helper()
	poll := func(what string, done func() (bool, error)) {
		t.Helper()
		if err := wait.PollUntilContextTimeout(ctx, 500*time.Millisecond, 2*time.Minute, true, func(context.Context) (bool, error) {
			return done()
		}); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
	}
	caps := &storagev1.CSIStorageCapacityList{}
	poll("capacity of lvms-vg1 published", func() (bool, error) {
		if err := c.List(ctx, caps, client.InNamespace("openshift-storage")); err != nil {
			return false, err
		}
		return slices.ContainsFunc(caps.Items, func(sc storagev1.CSIStorageCapacity) bool {
			return sc.StorageClassName == "lvms-vg1" && sc.Capacity != nil && sc.Capacity.Value() > 0 &&
				sc.NodeTopology != nil && sc.NodeTopology.MatchLabels["topology.topolvm.io/node"] == "lvms-local-3"
		}), nil
	})
	// The walkthrough's file, as the sandbox prints it.
	objs, err := DecodeFile(filepath.Join(testenv.RepoRoot(), "sandbox", "testdata", "claim.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range objs {
		if err := c.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	pvc := &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "data"}}
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "writer"}}
	poll("claim data Bound", func() (bool, error) {
		err := c.Get(ctx, client.ObjectKeyFromObject(pvc), pvc)
		return err == nil && pvc.Status.Phase == corev1.ClaimBound, err
	})
	pv := &corev1.PersistentVolume{}
	if err := c.Get(ctx, client.ObjectKey{Name: pvc.Spec.VolumeName}, pv); err != nil {
		t.Fatal(err)
	}
	if terms := pv.Spec.NodeAffinity.Required.NodeSelectorTerms; len(terms) != 1 || terms[0].MatchExpressions[0].Values[0] != "lvms-local-3" {
		t.Errorf("the PV's node affinity is %+v, want node lvms-local-3", pv.Spec.NodeAffinity)
	}
	sim, err := Node(state, "lvms-local-3")
	if err != nil {
		t.Fatal(err)
	}
	lv := pv.Spec.CSI.VolumeHandle
	inVG1 := func() (bool, error) {
		rep, err := sim.Runner.FullReport(ctx)
		if err != nil {
			return false, err
		}
		return slices.ContainsFunc(rep.LVs, func(l lvm.LV) bool { return l.VGName == "vg1" && l.Name == lv }), nil
	}
	if ok, err := inVG1(); err != nil || !ok {
		t.Fatalf("logical volume %s is not in vg1 on lvms-local-3 (%v)", lv, err)
	}
	// The scheduler binds the pod once its volume is bound.
	poll("pod writer on lvms-local-3", func() (bool, error) {
		err := c.Get(ctx, client.ObjectKeyFromObject(pod), pod)
		return err == nil && pod.Spec.NodeName == "lvms-local-3", err
	})

	// No kubelet ends the pod: it is removed at once.
	if err := c.Delete(ctx, pod, client.GracePeriodSeconds(0)); err != nil {
		t.Fatal(err)
	}
	if err := c.Delete(ctx, pvc); err != nil {
		t.Fatal(err)
	}
	poll("logical volume "+lv+" removed after its claim", func() (bool, error) {
		in, err := inVG1()
		return !in, err
	})
}

// checkModeAndConsole: --print-status says the nodes are simulated and what that means, and the console the
// sandbox printed answers with the sandbox's nodes.
func checkModeAndConsole(t *testing.T, state, out string) {
	t.Helper()
	var mode bytes.Buffer
	if err := PrintMode(state, &mode); err != nil || !strings.Contains(mode.String(), "simulated nodes") || !strings.Contains(mode.String(), "no kubelet") {
		t.Errorf("the mode says %q (%v), want simulated nodes without a kubelet", mode.String(), err)
	}
	_, rest, ok := strings.Cut(out, "the console: ")
	url, _, _ := strings.Cut(rest, "\n")
	if !ok || !strings.HasPrefix(url, "http://127.0.0.1:") {
		t.Fatalf("the sandbox printed no console URL:\n%s", out)
	}
	resp, err := http.Get(url + "/")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), "lvms-local-3") {
		t.Errorf("the console at %s answers %s without the sandbox's nodes:\n%.500s", url, resp.Status, body)
	}
}
