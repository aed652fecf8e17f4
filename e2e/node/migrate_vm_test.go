package node

import (
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/lvms-dev/lvms/e2e/vm"
)

// v1Cluster is an LVMS v1 cluster on the node's disks: a thick xfs class and a thin ext4 class.
const v1Cluster = `apiVersion: lvm.topolvm.io/v1alpha1
kind: LVMCluster
metadata: {name: e2e, namespace: lvms-system}
spec:
  storage:
    deviceClasses:
      - name: thick
        default: true
        fstype: xfs
        deviceSelector: {paths: [/dev/vda]}
      - name: thin
        fstype: ext4
        deviceSelector: {paths: [/dev/vdb]}
        thinPoolConfig: {name: pool, sizePercent: 90, overprovisionRatio: 5}
`

// TestNodeMigration migrates a running LVMCluster with volumes in use to LVMNodeSets with `lvms migrate`,
// the way an administrator would, and proves that nothing was lost or touched: the same LVs, PVs,
// LogicalVolumes and StorageClasses, the data read back with the same checksums, a snapshot still
// restorable, and no wipefs, pvcreate, vgcreate or removal run on the node during the migration.
func TestNodeMigration(t *testing.T) {
	if vm.InGuest() {
		Serve(t)
		return
	}
	tr := Start(t, Options{})
	step := steps(t)
	lvms := func(t *testing.T, args ...string) (string, int) {
		t.Helper()
		cmd := exec.Command(tr.lvmsBinary(t), append(args, "--kubeconfig", tr.Cluster.AdminKubeconfig, "-n", Namespace)...)
		out, err := cmd.CombinedOutput()
		if err != nil && cmd.ProcessState == nil {
			t.Fatalf("lvms %s: %v", strings.Join(args, " "), err)
		}
		return string(out), cmd.ProcessState.ExitCode()
	}
	// state is what must not change: LVs on the node, PVs with their handles, LogicalVolume and
	// StorageClass UIDs.
	state := func(t *testing.T) map[string]string {
		return map[string]string{
			"lvs":            tr.GuestRunOK(t, "node-a", "lvs", "--config", "devices/use_devicesfile=0", "--noheadings", "-o", "vg_name,lv_name,lv_size", "--units", "b", "thick", "thin"),
			"pvs":            tr.kubectlOK(t, "get", "pv", "-o", `jsonpath={range .items[*]}{.metadata.name} {.spec.csi.volumeHandle} {.spec.claimRef.name}{"\n"}{end}`),
			"logicalvolumes": tr.kubectlOK(t, "get", "logicalvolumes.topolvm.io", "-o", `jsonpath={range .items[*]}{.metadata.name} {.metadata.uid}{"\n"}{end}`),
			"storageclasses": tr.kubectlOK(t, "get", "storageclass", "lvms-thick", "lvms-thin", "-o", `jsonpath={range .items[*]}{.metadata.name} {.metadata.uid} {.parameters}{"\n"}{end}`),
		}
	}

	step("install as the README says", func(t *testing.T) { tr.Install(t, "kubernetes") })

	var first []string
	var before map[string]string
	step("an LVMCluster with volumes in use and a snapshot", func(t *testing.T) {
		tr.apply(t, v1Cluster)
		if out, err := tr.Kubectl("-n", Namespace, "wait", "lvmcluster/e2e", "--for=jsonpath={.status.state}=Ready", "--timeout=15m"); err != nil {
			status, _ := tr.Kubectl("-n", Namespace, "get", "lvmclusters,lvmvolumegroupnodestatuses", "-o", "yaml")
			t.Fatalf("the LVMCluster is not Ready: %v %s\n%s", err, out, status)
		}
		tr.apply(t, dataStatefulSet("thick", "thin"))
		first = checksums(t, tr.podLog(t, "default", "data-0", "started"), 2)
		tr.apply(t, strings.SplitN(copies, "---\n", 2)[0]) // the VolumeSnapshot alone
		tr.kubectlOK(t, "wait", "volumesnapshot/thin-snap", "--for=jsonpath={.status.readyToUse}=true", "--timeout=5m")
		before = state(t)
	})

	step("lvms migrate preflight, apply and verify", func(t *testing.T) {
		tr.GuestRunOK(t, "node-a", "sh", "-c", logStorageCommands)
		if out, code := lvms(t, "migrate", "plan"); code != 3 || !strings.Contains(out, "PathsNotRequired") {
			t.Errorf("lvms migrate plan: exit %d, want 3 (lossy: v1 paths are required, v2's are not):\n%s", code, out)
		}
		if out, code := lvms(t, "migrate", "preflight", "--accept-lossy"); code != 0 {
			t.Fatalf("lvms migrate preflight: exit %d\n%s", code, out)
		}
		out, code := lvms(t, "migrate", "apply", "--accept-lossy")
		t.Logf("lvms migrate apply:\n%s", out)
		if code != 0 {
			status, _ := tr.Kubectl("-n", Namespace, "get", "lvmclusters,lvmnodesets,lvmnodes", "-o", "yaml")
			t.Fatalf("lvms migrate apply: exit %d\n%s", code, status)
		}
		if out, code := lvms(t, "migrate", "verify", "e2e"); code != 0 {
			t.Errorf("lvms migrate verify: exit %d\n%s", code, out)
		}
		log := tr.GuestRunOK(t, "node-a", "sh", "-c", unlogStorageCommands)
		if !strings.Contains(log, "lvm fullreport") {
			t.Fatalf("the node's command log has no lvm report: the wrappers logged nothing, so it proves nothing:\n%s", log)
		}
		for _, line := range strings.Split(log, "\n") {
			f := strings.Fields(line)
			wipe := len(f) > 1 && f[0] == "wipefs" && !slices.Contains(f, "--no-act") // --no-act only reads the signatures
			if wipe || len(f) > 1 && f[0] == "lvm" && slices.Contains([]string{"pvcreate", "vgcreate", "vgremove", "lvremove", "pvremove", "vgreduce"}, f[1]) {
				t.Errorf("the migration ran %q on the node", line)
			}
		}
		if out, _ := tr.Kubectl("-n", Namespace, "get", "lvmclusters", "-o", "name"); strings.TrimSpace(out) != "" {
			t.Errorf("the LVMCluster is still there after the migration: %s", out)
		}
		if out := tr.kubectlOK(t, "-n", Namespace, "get", "lvmnodesets", "-o", "jsonpath={.items[*].metadata.annotations}"); !strings.Contains(out, "lvm.topolvm.io/migrated-from") {
			t.Errorf("no LVMNodeSet says it was migrated from the LVMCluster: %s", out)
		}
		after := state(t)
		for k, v := range before {
			if after[k] != v {
				t.Errorf("%s changed across the migration:\nbefore:\n%s\nafter:\n%s", k, v, after[k])
			}
		}
	})

	step("after the migration the data reads back, the snapshot restores and new claims provision", func(t *testing.T) {
		uid := tr.kubectlOK(t, "get", "pod", "data-0", "-o", "jsonpath={.metadata.uid}")
		tr.kubectlOK(t, "delete", "pod", "data-0", "--wait=true", "--timeout=5m")
		if err := poll(10*time.Minute, func() bool {
			out, err := tr.Kubectl("get", "pod", "data-0", "-o", "jsonpath={.metadata.uid}")
			return err == nil && out != "" && out != uid
		}); err != nil {
			t.Fatalf("the StatefulSet did not recreate its pod: %v", err)
		}
		if second := checksums(t, tr.podLog(t, "default", "data-0", "started"), 2); strings.Join(first, "\n") != strings.Join(second, "\n") {
			t.Errorf("checksums changed across the migration:\n%v\n%v", first, second)
		}
		tr.apply(t, strings.SplitN(copies, "---\n", 2)[1]) // restored and cloned claims, and their pod
		log := tr.podLog(t, "default", "copies", "/cloned ")
		for _, want := range []string{"/restored intact", "/cloned intact"} {
			if !strings.Contains(log, want) {
				t.Errorf("the copies pod printed %q; want %q", log, want)
			}
		}
	})
}
