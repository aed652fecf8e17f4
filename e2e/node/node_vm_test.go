package node

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/lvms-dev/lvms/e2e/testenv"
	"github.com/lvms-dev/lvms/e2e/vm"
	"github.com/lvms-dev/lvms/nodevm"
)

// TestNodeTier brings up one node and runs the flows on it.
func TestNodeTier(t *testing.T) {
	if vm.InGuest() {
		Serve(t)
		return
	}
	tr := Start(t, Options{})
	step := steps(t)

	step("a pod runs and its log reaches kubectl through the API server", func(t *testing.T) {
		ctx := context.Background()
		pod := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: "hello", Namespace: "default"},
			Spec: corev1.PodSpec{
				RestartPolicy: corev1.RestartPolicyNever,
				Containers: []corev1.Container{{
					Name: "hello", Image: nodevm.BusyboxImage,
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

	step("an LVMNodeSet with thick, thin and btrfs classes on the VM's disks becomes Ready", func(t *testing.T) {
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

	step("an OLM-style install (the CSV's permissions, no admission policy applied by hand): the operator creates the policies, the node agent cannot write another node's objects", func(t *testing.T) {
		tr.olmStyle(t)
	})

	var first []string // the StatefulSet's checksum lines, one per volume
	step("a StatefulSet writes to an xfs, an ext4 and a btrfs volume", func(t *testing.T) {
		tr.apply(t, statefulSet)
		first = checksums(t, tr.podLog(t, "default", "data-0", "started"), 3)
		mounts := tr.kubectlOK(t, "exec", "data-0", "--", "cat", "/proc/mounts")
		for mnt, fs := range map[string]string{"/thick": "xfs", "/thin": "ext4", "/btrfs": "btrfs"} {
			if !strings.Contains(mounts, " "+mnt+" "+fs+" ") {
				t.Errorf("%s is not an %s mount in the pod:\n%s", mnt, fs, mounts)
			}
		}
	})

	step("a kubelet restart leaves the running pod and its mounted volumes alone", func(t *testing.T) {
		uid := tr.kubectlOK(t, "get", "pod", "data-0", "-o", "jsonpath={.metadata.uid}")
		t.Log(tr.GuestRunOK(t, "node-a", nodevm.RestartKubelet))
		// kubectl exec goes through the kubelet: it answers once the new kubelet serves.
		var out string
		if err := poll(5*time.Minute, func() bool {
			var err error
			out, err = tr.Kubectl("exec", "data-0", "--", "sh", "-c", "for d in /thick /thin /btrfs; do (cd $d && sha256sum -c sum); done")
			return err == nil
		}); err != nil {
			t.Fatalf("the volumes do not check out after the kubelet restart: %v\n%s", err, out)
		}
		pod := tr.kubectlOK(t, "get", "pod", "data-0", "-o", "jsonpath={.metadata.uid} {.status.containerStatuses[0].restartCount} {.status.phase}")
		if pod != uid+" 0 Running" {
			t.Errorf("pod data-0 after the kubelet restart: uid, restarts, phase = %q; want %q", pod, uid+" 0 Running")
		}
	})

	step("the StatefulSet's pod recreated reads the same data; the old pod's mounts are gone", func(t *testing.T) {
		uid := tr.kubectlOK(t, "get", "pod", "data-0", "-o", "jsonpath={.metadata.uid}")
		tr.kubectlOK(t, "delete", "pod", "data-0", "--wait=true", "--timeout=5m")
		if out := tr.GuestRunOK(t, "node-a", "sh", "-c", "grep "+uid+" /proc/self/mountinfo || true"); strings.TrimSpace(out) != "" {
			t.Errorf("the deleted pod's volumes are still mounted on the node:\n%s", out)
		}
		if err := poll(10*time.Minute, func() bool {
			out, err := tr.Kubectl("get", "pod", "data-0", "-o", "jsonpath={.metadata.uid}")
			return err == nil && out != "" && out != uid
		}); err != nil {
			t.Fatalf("the StatefulSet did not recreate its pod: %v", err)
		}
		second := checksums(t, tr.podLog(t, "default", "data-0", "started"), 3)
		if strings.Join(first, "\n") != strings.Join(second, "\n") {
			t.Errorf("checksums changed across the pod's recreation:\n%v\n%v", first, second)
		}
	})

	step("the node agent killed between lvcreate and the PV: the claim binds to the one LV made", func(t *testing.T) {
		tr.GuestRunOK(t, "node-a", "sh", "-c", holdAfterLVCreate)
		defer tr.GuestRun("node-a", time.Minute, "sh", "-c", releaseLVCreate)
		tr.apply(t, crashClaim)
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
		defer cancel()
		if err := tr.vms.WaitSignal(ctx, "lvcreate-held"); err != nil {
			out, _ := tr.Kubectl("get", "pvc,logicalvolumes.topolvm.io", "-o", "wide")
			t.Fatalf("the agent never created the claim's LV: %v\n%s", err, out)
		}
		held, _ := os.ReadFile(filepath.Join(tr.vms.SharedDir(), "lvcreate-held"))
		if out := tr.kubectlOK(t, "get", "pvc", "crash", "-o", "jsonpath={.status.phase}"); out != "Pending" {
			t.Fatalf("the claim is %s while its lvcreate has not returned; want Pending", out)
		}
		agentRestarts := tr.kubectlOK(t, "-n", Namespace, "get", "pods", "-l", "app.kubernetes.io/component=node-agent",
			"-o", "jsonpath={.items[0].status.containerStatuses[0].restartCount}")
		t.Logf("killed the node agent (pids %s) after %s", tr.GuestRunOK(t, "node-a", nodevm.KillProcesses, "/lvms\x00nodeagent\x00"), held)
		tr.GuestRunOK(t, "node-a", "sh", "-c", releaseLVCreate)

		tr.podLog(t, "default", "crash", "written")
		if out := tr.kubectlOK(t, "-n", Namespace, "get", "pods", "-l", "app.kubernetes.io/component=node-agent",
			"-o", "jsonpath={.items[0].status.containerStatuses[0].restartCount}"); out == agentRestarts {
			t.Errorf("the kubelet did not restart the node agent (restarts %s before and after)", out)
		}
		// Every LV in the VG is some LogicalVolume's, once; the claim's is the one lvcreate made before the kill.
		lvs := strings.Fields(tr.GuestRunOK(t, "node-a", "lvs", "--config", "devices/use_devicesfile=0", "--noheadings", "-o", "lv_name", "thick"))
		var ids []string // of the thick class (the default: an empty deviceClass is the default's)
		for _, line := range strings.Split(tr.kubectlOK(t, "get", "logicalvolumes.topolvm.io", "-o", `jsonpath={range .items[*]}{.spec.deviceClass} {.status.volumeID}{"\n"}{end}`), "\n") {
			if class, id, _ := strings.Cut(line, " "); (class == "thick" || class == "") && id != "" {
				ids = append(ids, id)
			}
		}
		slices.Sort(lvs)
		slices.Sort(ids)
		if !slices.Equal(lvs, ids) {
			t.Errorf("LVs in VG thick %v; the LogicalVolumes' volume IDs %v: want the same set", lvs, ids)
		}
		pv := tr.kubectlOK(t, "get", "pvc", "crash", "-o", "jsonpath={.spec.volumeName}")
		id := tr.kubectlOK(t, "get", "pv", pv, "-o", "jsonpath={.spec.csi.volumeHandle}")
		if !strings.Contains(string(held), id) {
			t.Errorf("the claim's volume %s is not the LV created before the kill (%s)", id, held)
		}
		tr.kubectlOK(t, "delete", "pod", "crash", "--wait=true", "--timeout=5m")
		tr.kubectlOK(t, "delete", "pvc", "crash", "--wait=true", "--timeout=5m")
	})

	step("a PVC grows online: the file system grows inside the running pod", func(t *testing.T) {
		tr.growOnline(t, "data-0", "/thin", "thin-data-0", "512Mi", 200*1024)
		// The claim's capacity is written after the node expansion finished, so it may trail what df shows.
		var got string
		if err := poll(5*time.Minute, func() bool {
			got, _ = tr.Kubectl("get", "pvc", "thin-data-0", "-o", "jsonpath={.status.capacity.storage}")
			return got == "512Mi"
		}); err != nil {
			t.Errorf("PVC capacity %q after the resize, want 512Mi", got)
		}
	})

	step("a snapshot restored into a new PVC and a clone both carry the data", func(t *testing.T) {
		tr.apply(t, copies)
		log := tr.podLog(t, "default", "copies", "/cloned ")
		var thin string
		for _, l := range checksums(t, tr.podLog(t, "default", "data-0", "started"), 3) {
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
		lvms := tr.lvmsBinary(t)
		file := filepath.Join(tr.dir, "bundle.tar.gz")
		if out, err := exec.Command(lvms, "bundle", "--kubeconfig", tr.Cluster.AdminKubeconfig, "--timeout", "5m", file).CombinedOutput(); err != nil {
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
			return strings.Contains(msg, "thick-data-0") && strings.Contains(msg, "thin-data-0") && strings.Contains(msg, "btrfs-data-0")
		}); err != nil {
			out, _ := tr.Kubectl("-n", Namespace, "get", "lvmnodeset/e2e", "-o", "yaml")
			t.Fatalf("the set's deletion does not name the PVCs that block it (message %q): %v\n%s", msg, err, out)
		}
		if out, _ := tr.Kubectl("get", "pod", "data-0", "-o", "jsonpath={.status.phase}"); out != "Running" {
			t.Fatalf("the workload must keep running while the set waits: pod phase %q", out)
		}
		tr.kubectlOK(t, "delete", "statefulset", "data", "--wait=true", "--timeout=5m")
		tr.kubectlOK(t, "delete", "pvc", "thick-data-0", "thin-data-0", "btrfs-data-0", "--wait=true", "--timeout=5m")
		if err := poll(10*time.Minute, func() bool {
			out, _ := tr.Kubectl("get", "pv", "-o", "name")
			return strings.TrimSpace(out) == ""
		}); err != nil {
			out, _ := tr.Kubectl("get", "pv,logicalvolumes.topolvm.io", "-o", "yaml")
			t.Fatalf("the volumes were not deleted: %v\n%s", err, out)
		}
		tr.kubectlOK(t, "-n", Namespace, "wait", "lvmnodeset/e2e", "--for=delete", "--timeout=10m")
		// Unpublished and unstaged: the node has no CSI mount left.
		if out := tr.GuestRunOK(t, "node-a", "sh", "-c", "grep kubernetes.io~csi /proc/self/mountinfo; grep /kubernetes.io/csi/ /proc/self/mountinfo; true"); strings.TrimSpace(out) != "" {
			t.Errorf("CSI mounts left on the node after every volume was deleted:\n%s", out)
		}
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

// lvmsBinary builds the lvms command for the host side of a test (the CLI a user runs against the cluster).
func (tr *Tier) lvmsBinary(t *testing.T) string {
	t.Helper()
	lvms := filepath.Join(tr.dir, "lvms")
	if _, err := os.Stat(lvms); err == nil {
		return lvms
	}
	build := exec.Command("go", "build", "-o", lvms, "./cmd/lvms")
	build.Dir = testenv.RepoRoot()
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build lvms: %v\n%s", err, out)
	}
	return lvms
}

// steps runs each step as a subtest; each builds on the one before, so the first failure ends the test.
func steps(t *testing.T) func(name string, f func(t *testing.T)) {
	return func(name string, f func(t *testing.T)) {
		t.Helper()
		if !t.Run(name, f) {
			t.FailNow()
		}
	}
}
