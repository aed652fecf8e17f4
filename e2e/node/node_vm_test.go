package node

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/lvms-dev/lvms/e2e/testenv"
	"github.com/lvms-dev/lvms/e2e/vm"
)

// TestNodeTier brings up one node and runs the flows on it.
func TestNodeTier(t *testing.T) {
	if vm.InGuest() {
		Serve(t)
		return
	}
	tr := Start(t, Options{})
	// Each step builds on the one before: the first failure ends the test.
	step := func(name string, f func(t *testing.T)) {
		t.Helper()
		if !t.Run(name, f) {
			t.FailNow()
		}
	}

	step("a pod runs and its log reaches kubectl through the API server", func(t *testing.T) {
		ctx := context.Background()
		pod := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: "hello", Namespace: "default"},
			Spec: corev1.PodSpec{
				RestartPolicy: corev1.RestartPolicyNever,
				Containers: []corev1.Container{{
					Name: "hello", Image: BusyboxImage,
					Command: []string{"sh", "-c", `echo "hello from $(hostname) on $(uname -r)"`},
				}},
			},
		}
		if _, err := tr.Client.CoreV1().Pods("default").Create(ctx, pod, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		var phase corev1.PodPhase
		err := wait.PollUntilContextTimeout(ctx, 2*time.Second, 5*time.Minute, true, func(ctx context.Context) (bool, error) {
			p, err := tr.Client.CoreV1().Pods("default").Get(ctx, "hello", metav1.GetOptions{})
			if err != nil {
				return false, err
			}
			phase = p.Status.Phase
			return phase == corev1.PodSucceeded || phase == corev1.PodFailed, nil
		})
		logs, logErr := tr.Kubectl("logs", "hello")
		if err != nil || phase != corev1.PodSucceeded {
			out, _ := tr.Kubectl("describe", "pod", "hello")
			t.Fatalf("pod phase %s (%v); its log (%v):\n%s\n%s", phase, err, logErr, logs, out)
		}
		if logErr != nil || !strings.Contains(logs, "hello from hello on ") {
			t.Fatalf("kubectl logs: %v: %s", logErr, logs)
		}
	})

	step("install as the README says", func(t *testing.T) {
		tr.Install(t, "kubernetes")
	})

	step("an LVMNodeSet with thick and thin classes on the VM's disks becomes Ready", func(t *testing.T) {
		tr.apply(t, nodeSet)
		if out, err := tr.Kubectl("-n", Namespace, "wait", "lvmnodeset/e2e", "--for=jsonpath={.status.state}=Ready", "--timeout=15m"); err != nil {
			status, _ := tr.Kubectl("-n", Namespace, "get", "lvmnodesets,lvmnodes", "-o", "yaml")
			pods, _ := tr.Kubectl("-n", Namespace, "get", "pods", "-o", "wide")
			t.Fatalf("the set is not Ready: %v %s\n%s\n%s", err, out, status, pods)
		}
		tr.kubectlOK(t, "get", "storageclass", "lvms-thick", "lvms-thin")
		if err := poll(5*time.Minute, func() bool {
			out, _ := tr.Kubectl("get", "csinode", "node-a", "-o", "jsonpath={.spec.drivers[*].name}")
			return strings.Contains(out, "topolvm.io")
		}); err != nil {
			out, _ := tr.Kubectl("get", "csinode", "node-a", "-o", "yaml")
			t.Fatalf("the kubelet does not list the CSI driver: %v\n%s", err, out)
		}
	})

	step("a StatefulSet keeps its data when its pod is recreated", func(t *testing.T) {
		tr.apply(t, statefulSet)
		first := checksums(t, tr.podLog(t, "default", "data-0", "started"))
		uid := tr.kubectlOK(t, "get", "pod", "data-0", "-o", "jsonpath={.metadata.uid}")
		tr.kubectlOK(t, "delete", "pod", "data-0", "--wait=true", "--timeout=5m")
		if err := poll(10*time.Minute, func() bool {
			out, err := tr.Kubectl("get", "pod", "data-0", "-o", "jsonpath={.metadata.uid}")
			return err == nil && out != "" && out != uid
		}); err != nil {
			t.Fatalf("the StatefulSet did not recreate its pod: %v", err)
		}
		second := checksums(t, tr.podLog(t, "default", "data-0", "started"))
		if strings.Join(first, "\n") != strings.Join(second, "\n") {
			t.Errorf("checksums changed across the pod's recreation:\n%v\n%v", first, second)
		}
	})

	step("a PVC grows online: the file system grows inside the running pod", func(t *testing.T) {
		before := dfKiB(t, tr, "data-0", "/thin")
		tr.kubectlOK(t, "patch", "pvc", "thin-data-0", "--type=merge", "-p", `{"spec":{"resources":{"requests":{"storage":"512Mi"}}}}`)
		var after int64
		if err := poll(10*time.Minute, func() bool {
			after = dfKiB(t, tr, "data-0", "/thin")
			return after > before+200*1024
		}); err != nil {
			pvc, _ := tr.Kubectl("get", "pvc", "thin-data-0", "-o", "yaml")
			t.Fatalf("the file system did not grow (%d KiB, then %d KiB): %v\n%s", before, after, err, pvc)
		}
		if got := tr.kubectlOK(t, "get", "pvc", "thin-data-0", "-o", "jsonpath={.status.capacity.storage}"); got != "512Mi" {
			t.Errorf("PVC capacity %q after the resize, want 512Mi", got)
		}
	})

	step("a snapshot restored into a new PVC and a clone both carry the data", func(t *testing.T) {
		tr.apply(t, copies)
		log := tr.podLog(t, "default", "copies", "/cloned ")
		var thin string
		for _, l := range checksums(t, tr.podLog(t, "default", "data-0", "started")) {
			if strings.HasPrefix(l, "/thin ") {
				thin = strings.TrimPrefix(l, "/thin ")
			}
		}
		for _, want := range []string{"/restored " + thin, "/cloned " + thin} {
			if !strings.Contains(log, want) {
				t.Errorf("the copies pod printed %q; want %q (the thin volume's checksum)", log, want)
			}
		}
		tr.kubectlOK(t, "delete", "pod", "copies", "--wait=true", "--timeout=5m")
		tr.kubectlOK(t, "delete", "pvc", "restored", "cloned", "--wait=true", "--timeout=5m")
		tr.kubectlOK(t, "delete", "volumesnapshot", "thin-snap", "--wait=true", "--timeout=5m")
	})

	step("a raw block volume keeps what a pod wrote to the device for the next pod", func(t *testing.T) {
		tr.apply(t, rawClaim+"---\n"+rawBlock("block-writer", true))
		wrote := tr.podLog(t, "default", "block-writer", "block ")
		tr.kubectlOK(t, "delete", "pod", "block-writer", "--wait=true", "--timeout=5m")
		tr.apply(t, rawBlock("block-reader", false))
		read := tr.podLog(t, "default", "block-reader", "block ")
		if strings.TrimSpace(wrote) != strings.TrimSpace(read) {
			t.Errorf("the device's first 16 MiB: written %q, read back %q", wrote, read)
		}
		tr.kubectlOK(t, "delete", "pod", "block-reader", "--wait=true", "--timeout=5m")
		tr.kubectlOK(t, "delete", "pvc", "raw", "--wait=true", "--timeout=5m")
	})

	step("lvms bundle collects the node agent's own view through pods/proxy", func(t *testing.T) {
		lvms := filepath.Join(tr.dir, "lvms")
		build := exec.Command("go", "build", "-o", lvms, "./cmd/lvms")
		build.Dir = testenv.RepoRoot()
		if out, err := build.CombinedOutput(); err != nil {
			t.Fatalf("build lvms: %v\n%s", err, out)
		}
		file := filepath.Join(tr.dir, "bundle.tar.gz")
		if out, err := exec.Command(lvms, "bundle", "--kubeconfig", tr.Cluster.AdminKubeconfig, "-o", file, "--timeout", "5m").CombinedOutput(); err != nil {
			t.Fatalf("lvms bundle: %v\n%s", err, out)
		}
		dir := t.TempDir()
		if out, err := exec.Command("tar", "-xzf", file, "-C", dir, "--strip-components=1").CombinedOutput(); err != nil {
			t.Fatalf("untar the bundle: %v\n%s", err, out)
		}
		for name, want := range map[string]string{
			"nodes/node-a/lvm-fullreport.json":                             `"thin"`, // the agent's own LVM report: the VGs it made
			"nodes/node-a/lsblk.json":                                      `vdb`,
			"nodes/node-a/device-verdicts.json":                            `vda`,
			"cluster-scoped-resources/storage.k8s.io/csinodes/node-a.yaml": "topolvm.io",
		} {
			b, err := os.ReadFile(filepath.Join(dir, name))
			if err != nil || !strings.Contains(string(b), want) {
				ls, _ := exec.Command("find", dir, "-maxdepth", "3").CombinedOutput()
				t.Errorf("bundle file %s (%v) lacks %q; the bundle holds:\n%s", name, err, want, ls)
			}
		}
	})

	step("uninstall as the README says: blocked while PVCs exist, then clean", func(t *testing.T) {
		tr.kubectlOK(t, "-n", Namespace, "delete", "lvmnodeset/e2e", "--wait=false")
		var msg string
		if err := poll(5*time.Minute, func() bool {
			msg, _ = tr.Kubectl("-n", Namespace, "get", "lvmnodeset/e2e", "-o", "jsonpath={.status.message}")
			return strings.Contains(msg, "thick-data-0") && strings.Contains(msg, "thin-data-0")
		}); err != nil {
			out, _ := tr.Kubectl("-n", Namespace, "get", "lvmnodeset/e2e", "-o", "yaml")
			t.Fatalf("the set's deletion does not name the PVCs that block it (message %q): %v\n%s", msg, err, out)
		}
		if out, _ := tr.Kubectl("get", "pod", "data-0", "-o", "jsonpath={.status.phase}"); out != "Running" {
			t.Fatalf("the workload must keep running while the set waits: pod phase %q", out)
		}
		tr.kubectlOK(t, "delete", "statefulset", "data", "--wait=true", "--timeout=5m")
		tr.kubectlOK(t, "delete", "pvc", "thick-data-0", "thin-data-0", "--wait=true", "--timeout=5m")
		if err := poll(10*time.Minute, func() bool {
			out, _ := tr.Kubectl("get", "pv", "-o", "name")
			return strings.TrimSpace(out) == ""
		}); err != nil {
			out, _ := tr.Kubectl("get", "pv,logicalvolumes", "-o", "yaml")
			t.Fatalf("the volumes were not deleted: %v\n%s", err, out)
		}
		tr.kubectlOK(t, "-n", Namespace, "wait", "lvmnodeset/e2e", "--for=delete", "--timeout=10m")
		// With the last set gone the operator removes the node agents and the CSIDriver (README, Uninstall).
		tr.kubectlOK(t, "wait", "csidriver/topolvm.io", "--for=delete", "--timeout=5m")
		tr.kubectlOK(t, "-n", Namespace, "wait", "daemonset/lvms-node-agent", "--for=delete", "--timeout=5m")
		overlay := filepath.Join(tr.dir, "overlay-kubernetes")
		tr.kubectlOK(t, "delete", "-k", overlay, "--wait=true", "--timeout=10m")
		tr.kubectlOK(t, "delete", "-f", "deploy/crds/", "-f", "deploy/crds/legacy/", "--wait=true", "--timeout=5m")
		if out, _ := tr.Kubectl("get", "namespace", Namespace, "-o", "name", "--ignore-not-found"); strings.TrimSpace(out) != "" {
			t.Errorf("namespace %s is still there after the uninstall: %s", Namespace, out)
		}
		if out := tr.kubectlOK(t, "get", "storageclass,csidriver,volumesnapshotclass", "-o", "name"); strings.Contains(out, "lvms-") || strings.Contains(out, "topolvm.io") {
			t.Errorf("left behind after the uninstall: %s", out)
		}
	})
}

// dfKiB is the size of the file system at path inside the pod, through kubectl exec.
func dfKiB(t *testing.T, tr *Tier, pod, path string) int64 {
	t.Helper()
	out, err := tr.Kubectl("exec", pod, "--", "df", "-kP", path) // -P: one line per file system, never wrapped
	if err != nil {
		t.Logf("kubectl exec df: %v: %s", err, out)
		return 0
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	f := strings.Fields(lines[len(lines)-1])
	if len(f) < 2 {
		return 0
	}
	n, _ := strconv.ParseInt(f[1], 10, 64)
	return n
}
