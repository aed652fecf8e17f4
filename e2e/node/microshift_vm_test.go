package node

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr/testr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/lvms-dev/lvms/api/topolvm/driver"
	"github.com/lvms-dev/lvms/e2e/topolvmstate"
	"github.com/lvms-dev/lvms/e2e/vm"
	"github.com/lvms-dev/lvms/nodevm"
)

// The MicroShift take-over on a real node: what TopoLVM left, then LVMS installed with its MicroShift overlay.
const (
	msNamespace = MicroShiftNamespace
	msVG        = "rhel"
	msLVMD      = "/var/lib/microshift/lvms/lvmd.yaml" // what MicroShift renders from /etc/microshift/lvmd.yaml
)

// sccCRD serves MicroShift's SecurityContextConstraints API so that the overlay applies as it is; plain
// Kubernetes does not enforce it (the node agent's privileges come from its pod spec here).
const sccCRD = `apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: securitycontextconstraints.security.openshift.io}
spec:
  group: security.openshift.io
  scope: Cluster
  names: {kind: SecurityContextConstraints, listKind: SecurityContextConstraintsList, plural: securitycontextconstraints, singular: securitycontextconstraints}
  versions:
    - name: v1
      served: true
      storage: true
      schema:
        openAPIV3Schema: {type: object, x-kubernetes-preserve-unknown-fields: true}
`

// topolvmLeftovers are TopoLVM's cluster objects on MicroShift: its CSIDriver, its default StorageClass, a
// thin class an admin added, its VolumeSnapshotClass, and its controller Deployment (scaled to zero: only an
// owner here).
const topolvmLeftovers = `apiVersion: v1
kind: Namespace
metadata: {name: openshift-storage}
---
apiVersion: storage.k8s.io/v1
kind: CSIDriver
metadata: {name: topolvm.io}
spec: {attachRequired: false, podInfoOnMount: true, storageCapacity: true, volumeLifecycleModes: [Persistent]}
---
apiVersion: storage.k8s.io/v1
kind: StorageClass
metadata:
  name: topolvm-provisioner
  annotations: {storageclass.kubernetes.io/is-default-class: "true"}
provisioner: topolvm.io
parameters: {csi.storage.k8s.io/fstype: xfs}
reclaimPolicy: Delete
volumeBindingMode: WaitForFirstConsumer
allowVolumeExpansion: true
---
apiVersion: storage.k8s.io/v1
kind: StorageClass
metadata: {name: topolvm-thin}
provisioner: topolvm.io
parameters: {csi.storage.k8s.io/fstype: ext4, topolvm.io/device-class: thin}
reclaimPolicy: Delete
volumeBindingMode: WaitForFirstConsumer
allowVolumeExpansion: true
---
apiVersion: snapshot.storage.k8s.io/v1
kind: VolumeSnapshotClass
metadata: {name: topolvm-snapclass}
driver: topolvm.io
deletionPolicy: Delete
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: topolvm-controller, namespace: openshift-storage}
spec:
  replicas: 0
  selector: {matchLabels: {app: topolvm-controller}}
  template:
    metadata: {labels: {app: topolvm-controller}}
    spec:
      containers: [{name: topolvm-controller, image: ` + nodevm.PauseImage + `}]
`

// topolvmCapacity is a CSIStorageCapacity as TopoLVM's external-provisioner publishes it, owned by its
// Deployment.
func topolvmCapacity(class, ownerUID string) string {
	return `apiVersion: storage.k8s.io/v1
kind: CSIStorageCapacity
metadata:
  generateName: csisc-
  namespace: openshift-storage
  labels: {csi.storage.k8s.io/drivername: topolvm.io, csi.storage.k8s.io/managed-by: external-provisioner}
  ownerReferences: [{apiVersion: apps/v1, kind: Deployment, name: topolvm-controller, uid: ` + ownerUID + `, controller: true}]
storageClassName: ` + class + `
nodeTopology: {matchLabels: {topology.topolvm.io/node: node-a}}
capacity: 1Gi
`
}

// msApp mounts TopoLVM's xfs and ext4 volumes and prints whether their data is intact.
const msApp = `apiVersion: v1
kind: Pod
metadata: {name: app, namespace: default}
spec:
  terminationGracePeriodSeconds: 1
  containers:
    - name: app
      image: ` + nodevm.BusyboxImage + `
      command: [sh, -c, 'for d in /db /cache; do cd $d && sha256sum -c sum >/dev/null && echo "$d intact $(cut -c1-16 sum)" || echo "$d CORRUPT"; done; echo started; exec sleep 100000']
      volumeMounts: [{name: db, mountPath: /db}, {name: cache, mountPath: /cache}]
  volumes:
    - {name: db, persistentVolumeClaim: {claimName: db}}
    - {name: cache, persistentVolumeClaim: {claimName: cache}}
`

// msCopies restores a snapshot of cache into a new claim and makes a new claim of the default class, and
// a pod checks the restored data and writes to the new volume.
const msCopies = `apiVersion: snapshot.storage.k8s.io/v1
kind: VolumeSnapshot
metadata: {name: cache-snap, namespace: default}
spec:
  volumeSnapshotClassName: topolvm-snapclass
  source: {persistentVolumeClaimName: cache}
---
apiVersion: v1
kind: PersistentVolumeClaim
metadata: {name: cache-restored, namespace: default}
spec:
  accessModes: [ReadWriteOnce]
  storageClassName: topolvm-thin
  resources: {requests: {storage: 512Mi}}
  dataSource: {apiGroup: snapshot.storage.k8s.io, kind: VolumeSnapshot, name: cache-snap}
---
apiVersion: v1
kind: PersistentVolumeClaim
metadata: {name: fresh, namespace: default}
spec:
  accessModes: [ReadWriteOnce]
  resources: {requests: {storage: 128Mi}}
---
apiVersion: v1
kind: Pod
metadata: {name: copies, namespace: default}
spec:
  terminationGracePeriodSeconds: 1
  containers:
    - name: check
      image: ` + nodevm.BusyboxImage + `
      command: [sh, -c, 'cd /restored && sha256sum -c sum >/dev/null && echo "/restored intact $(cut -c1-16 sum)" || echo "/restored CORRUPT"; echo new > /fresh/file && sync && echo written; exec sleep 100000']
      volumeMounts: [{name: restored, mountPath: /restored}, {name: fresh, mountPath: /fresh}]
  volumes:
    - {name: restored, persistentVolumeClaim: {claimName: cache-restored}}
    - {name: fresh, persistentVolumeClaim: {claimName: fresh}}
`

// TestNodeMicroShiftTakeover: a MicroShift node upgraded from TopoLVM, on a real kubelet. The node holds what
// TopoLVM left — MicroShift's lvmd.yaml, thick and thin LVs with data named after their LogicalVolumes' UIDs —
// and the API server its LogicalVolumes, PVs, bound PVCs, StorageClasses, VolumeSnapshotClass, node label and
// capacity annotations, and the CSIStorageCapacity objects its external-provisioner published. LVMS is then
// installed with deploy/overlays/microshift. Nothing that exists changes; pods read TopoLVM's volumes with
// their data; a claim grows online; a snapshot restores; a claim is deleted (its LV goes); a new claim
// provisions; TopoLVM's Deployment removed, its capacity objects stay (LVMS's now). Then LVMS is stopped as
// the README says and what TopoLVM reads is as it left it.
//
// Once per group: topolvm.io, and topolvm.cybozu.com for a cluster still on TopoLVM's legacy group, which the
// installed operator and agent detect and serve by themselves.
func TestNodeMicroShiftTakeover(t *testing.T) {
	for _, legacy := range []bool{false, true} {
		names := driver.New(legacy)
		t.Run(names.Driver(), func(t *testing.T) {
			if vm.InGuest() {
				Serve(t)
				return
			}
			microshiftTakeover(t, names)
		})
	}
}

func microshiftTakeover(t *testing.T, names driver.Names) {
	tr := Start(t, Options{Nodes: []nodevm.NodeOptions{{Name: "node-a", Disks: []vm.Disk{{Size: 3 << 30}}}}})
	step := steps(t)
	ctx := context.Background()
	// group puts TopoLVM's objects and names in the group under test.
	group := func(s string) string { return strings.ReplaceAll(s, "topolvm.io", names.Driver()) }
	lvResource := "logicalvolumes." + names.Driver()
	scheme, err := names.Scheme()
	if err != nil {
		t.Fatal(err)
	}
	log.SetLogger(testr.New(t))
	c, err := client.New(tr.Cluster.Config, client.Options{Scheme: scheme})
	if err != nil {
		t.Fatal(err)
	}
	vols := []*topolvmstate.Volume{
		{Claim: "db", Class: "default", FS: "xfs", Size: 400 << 20},
		{Claim: "cache", Class: "thin", FS: "ext4", Size: 512 << 20},
		{Claim: "raw", Class: "default", Size: 64 << 20},
	}
	db, cache, raw := vols[0], vols[1], vols[2]
	lvs := func(t *testing.T) []string {
		out := strings.Fields(tr.GuestRunOK(t, "node-a", "lvs", "--config", "devices/use_devicesfile=0", "--noheadings", "-o", "lv_name", msVG))
		slices.Sort(out)
		return out
	}
	// unchanged is what LVMS must leave as TopoLVM wrote it, and what TopoLVM reads after a rollback.
	unchanged := func(t *testing.T) map[string]string {
		return map[string]string{
			"lvmd.yaml": tr.GuestRunOK(t, "node-a", "cat", msLVMD),
			"logicalvolumes": tr.kubectlOK(t, "get", lvResource, "-o",
				`jsonpath={range .items[*]}{.metadata.name} {.metadata.uid} {.metadata.finalizers} {.metadata.labels} {.spec} {.status.volumeID}{"\n"}{end}`),
			"classes": tr.kubectlOK(t, "get", "storageclass,volumesnapshotclass", "-o",
				`jsonpath={range .items[*]}{.metadata.name} {.metadata.uid} {.metadata.annotations} {.parameters} {.driver}{"\n"}{end}`),
			"csidriver": tr.kubectlOK(t, "get", "csidriver", names.Driver(), "-o", "jsonpath={.metadata.uid} {.spec}"),
			"pvs":       tr.kubectlOK(t, "get", "pv", "-o", `jsonpath={range .items[*]}{.metadata.name} {.spec.csi.volumeHandle} {.spec.claimRef.name} {.status.phase}{"\n"}{end}`),
		}
	}
	var before map[string]string
	var lvsBefore []string
	sums := map[string]string{}
	capacityUIDs := map[string]string{}

	step("TopoLVM's state on the node and in the API", func(t *testing.T) {
		crd := "deploy/crds/topolvm.io_logicalvolumes.yaml" // TopoLVM's CRD: the same shape
		if names.Legacy() {
			crd = "deploy/crds/legacy/topolvm.cybozu.com_logicalvolumes.yaml"
		}
		tr.kubectlOK(t, "apply", "--server-side", "-f", crd)
		tr.apply(t, group(topolvmLeftovers))
		for _, v := range vols {
			class := "topolvm-provisioner"
			if v.Class == "thin" {
				class = "topolvm-thin"
			}
			if err := v.Create(ctx, c, names, "default", class, "node-a"); err != nil {
				t.Fatal(err)
			}
		}
		script := []string{"set -e", "lvm() { command lvm \"$@\" --config devices/use_devicesfile=0; }",
			"lvm pvcreate -y /dev/vda", "lvm vgcreate " + msVG + " /dev/vda", "lvm lvcreate -y --type thin-pool -L 1536M -n thin " + msVG,
			"m=$(mktemp -d)"}
		for _, v := range vols {
			dev := "/dev/" + msVG + "/" + v.UID
			script = append(script, "lvm lvcreate "+strings.Join(topolvmstate.LVCreateArgs(msVG, v.Class, v.UID, v.Size), " "))
			if v.FS == "" {
				script = append(script, "dd if=/dev/urandom of="+dev+" bs=1M count=16 oflag=direct 2>/dev/null",
					"echo sum "+v.Claim+" $(dd if="+dev+" bs=1M count=16 2>/dev/null | sha256sum | cut -c1-16)")
				continue
			}
			script = append(script, "mkfs."+v.FS+" -q "+dev, "mount "+dev+" $m",
				"dd if=/dev/urandom of=$m/blob bs=1M count=8 2>/dev/null", "(cd $m && sha256sum blob > sum)",
				"echo sum "+v.Claim+" $(cut -c1-16 $m/sum)", "umount $m")
		}
		script = append(script, "mkdir -p "+filepath.Dir(msLVMD), "cat > "+msLVMD+" <<'EOF'\n"+topolvmstate.LVMDConfig(msVG)+"EOF")
		for _, line := range strings.Split(strings.TrimSpace(tr.GuestRunOK(t, "node-a", "sh", "-c", strings.Join(script, "\n"))), "\n") {
			if f := strings.Fields(line); len(f) == 3 && f[0] == "sum" {
				sums[f[1]] = f[2]
			}
		}
		if len(sums) != len(vols) {
			t.Fatalf("checksums of TopoLVM's volumes: %v", sums)
		}
		// What topolvm-node left on the Node: the topology label and capacity annotations (stale by now).
		tr.kubectlOK(t, "label", "node", "node-a", names.TopologyKey()+"=node-a")
		tr.kubectlOK(t, "annotate", "node", "node-a", names.CapacityAnnotation("default")+"=1073741824", names.CapacityAnnotation("thin")+"=1073741824")
		owner := tr.kubectlOK(t, "-n", msNamespace, "get", "deployment", "topolvm-controller", "-o", "jsonpath={.metadata.uid}")
		for _, class := range []string{"topolvm-provisioner", "topolvm-thin"} {
			if out, err := tr.KubectlIn(group(topolvmCapacity(class, owner)), "create", "-f", "-"); err != nil { // generateName: create, not apply
				t.Fatalf("kubectl create: %v\n%s", err, out)
			}
		}
		// A ConfigMap owned the same way: its removal shows the garbage collector acted on the Deployment's.
		tr.apply(t, `apiVersion: v1
kind: ConfigMap
metadata:
  name: topolvm-owned
  namespace: openshift-storage
  ownerReferences: [{apiVersion: apps/v1, kind: Deployment, name: topolvm-controller, uid: `+owner+`}]
`)
		for _, line := range strings.Split(tr.kubectlOK(t, "-n", msNamespace, "get", "csistoragecapacities", "-o",
			`jsonpath={range .items[*]}{.storageClassName} {.metadata.uid}{"\n"}{end}`), "\n") {
			if class, uid, ok := strings.Cut(line, " "); ok {
				capacityUIDs[class] = uid
			}
		}
		before, lvsBefore = unchanged(t), lvs(t)
		t.Logf("TopoLVM's state: LVs %v, checksums %v", lvsBefore, sums)
	})

	step("LVMS installed with the MicroShift overlay changes nothing that exists", func(t *testing.T) {
		tr.apply(t, sccCRD)
		tr.kubectlOK(t, "wait", "crd/securitycontextconstraints.security.openshift.io", "--for=condition=Established", "--timeout=1m")
		tr.Install(t, "microshift")
		if out, err := tr.Kubectl("-n", msNamespace, "wait", "lvmcluster/lvms", "--for=jsonpath={.status.state}=Ready", "--timeout=15m"); err != nil {
			status, _ := tr.Kubectl("-n", msNamespace, "get", "lvmclusters,lvmvolumegroupnodestatuses", "-o", "yaml")
			pods, _ := tr.Kubectl("-n", msNamespace, "get", "pods", "-o", "wide")
			t.Fatalf("the LVMCluster is not Ready: %v %s\n%s\n%s", err, out, status, pods)
		}
		if err := poll(5*time.Minute, func() bool {
			out, _ := tr.Kubectl("get", "csinode", "node-a", "-o", "jsonpath={.spec.drivers[*].name}")
			return slices.Contains(strings.Fields(out), names.Driver())
		}); err != nil {
			t.Fatalf("the kubelet does not list %s: %v", names.Driver(), err)
		}
		// The agent's capacity figures replace topolvm-node's under the same annotations.
		if err := poll(5*time.Minute, func() bool {
			out, _ := tr.Kubectl("get", "node", "node-a", "-o", "jsonpath={.metadata.annotations}")
			return strings.Contains(out, names.CapacityAnnotation("thin")) && !strings.Contains(out, `"1073741824"`)
		}); err != nil {
			out, _ := tr.Kubectl("get", "node", "node-a", "-o", "jsonpath={.metadata.annotations}")
			t.Fatalf("the node's capacity annotations are not LVMS's figures: %v\n%s", err, out)
		}
		if err := poll(5*time.Minute, func() bool {
			out, _ := tr.Kubectl("-n", msNamespace, "get", "csistoragecapacities", "-o",
				`jsonpath={range .items[*]}{.storageClassName} {.metadata.uid} {.metadata.labels.app\.kubernetes\.io/managed-by} {.metadata.ownerReferences}{"\n"}{end}`)
			return strings.Count(out, " lvms-"+strings.ReplaceAll(names.Driver(), ".", "-")+" \n") == 2 && strings.Count(strings.TrimSpace(out), "\n") == 1 &&
				strings.Contains(out, "topolvm-provisioner "+capacityUIDs["topolvm-provisioner"]) && strings.Contains(out, "topolvm-thin "+capacityUIDs["topolvm-thin"])
		}); err != nil {
			out, _ := tr.Kubectl("-n", msNamespace, "get", "csistoragecapacities", "-o", "yaml")
			t.Fatalf("TopoLVM's CSIStorageCapacity objects (%v) are not taken over in place: %v\n%s", capacityUIDs, err, out)
		}
		after := unchanged(t)
		for k, v := range before {
			if after[k] != v {
				t.Errorf("%s changed when LVMS started:\nbefore:\n%s\nafter:\n%s", k, v, after[k])
			}
		}
		if got := lvs(t); !slices.Equal(got, lvsBefore) {
			t.Errorf("LVs after LVMS started: %v, before %v", got, lvsBefore)
		}
	})

	step("pods read TopoLVM's volumes with their data", func(t *testing.T) {
		tr.apply(t, msApp)
		log := tr.podLog(t, "default", "app", "started")
		for _, v := range []*topolvmstate.Volume{db, cache} {
			if want := "/" + v.Claim + " intact " + sums[v.Claim]; !strings.Contains(log, want) {
				t.Errorf("pod app printed %q; want %q", log, want)
			}
		}
		tr.apply(t, rawBlock("block-reader", false))
		if log, want := tr.podLog(t, "default", "block-reader", "block "), "block "+sums["raw"]; strings.TrimSpace(log) != want {
			t.Errorf("the raw block volume's first 16 MiB read in a pod: %q; want %q", log, want)
		}
	})

	step("a claim of TopoLVM's grows online inside the pod", func(t *testing.T) {
		tr.growOnline(t, "app", "/db", "db", "600Mi", 150*1024)
	})

	step("a snapshot of a TopoLVM volume restores, and a new claim provisions beside them", func(t *testing.T) {
		tr.apply(t, msCopies)
		log := tr.podLog(t, "default", "copies", "written")
		if want := "/restored intact " + sums["cache"]; !strings.Contains(log, want) {
			t.Errorf("pod copies printed %q; want %q", log, want)
		}
	})

	step("a claim of TopoLVM's deleted: its LV goes", func(t *testing.T) {
		tr.kubectlOK(t, "delete", "pod", "block-reader", "--wait=true", "--timeout=5m")
		tr.kubectlOK(t, "delete", "pvc", "raw", "--wait=true", "--timeout=5m")
		if err := poll(5*time.Minute, func() bool {
			_, err := tr.Kubectl("get", "pv", raw.Name)
			return err != nil && !slices.Contains(lvs(t), raw.UID)
		}); err != nil {
			out, _ := tr.Kubectl("get", "pv,"+lvResource, "-o", "wide")
			t.Fatalf("raw's PV or LV %s is still there: %v\n%s\nLVs %v", raw.UID, err, out, lvs(t))
		}
	})

	step("TopoLVM's Deployment removed: the capacity objects LVMS took over stay", func(t *testing.T) {
		tr.kubectlOK(t, "-n", msNamespace, "delete", "deployment", "topolvm-controller")
		tr.kubectlOK(t, "-n", msNamespace, "wait", "configmap/topolvm-owned", "--for=delete", "--timeout=5m") // the collector ran
		out := tr.kubectlOK(t, "-n", msNamespace, "get", "csistoragecapacities", "-o", `jsonpath={range .items[*]}{.storageClassName} {.metadata.uid}{"\n"}{end}`)
		for class, uid := range capacityUIDs {
			if !strings.Contains(out, class+" "+uid) {
				t.Errorf("capacity object %s of %s was collected with TopoLVM's Deployment: %s", uid, class, out)
			}
		}
	})

	step("memory of LVMS's processes, idle", func(t *testing.T) {
		time.Sleep(30 * time.Second) // settle after the last change; the figure is read, not timed
		out := tr.GuestRunOK(t, "node-a", "sh", "-c", `for p in $(pgrep -x lvms); do echo "$(tr '\0' ' ' < /proc/$p/cmdline| cut -d' ' -f1-2) $(awk '/VmRSS/{print $2}' /proc/$p/status)"; done`)
		var total int64
		for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
			f := strings.Fields(line)
			if len(f) > 0 {
				kib, _ := strconv.ParseInt(f[len(f)-1], 10, 64)
				total += kib
			}
		}
		t.Logf("MicroShift deployment on a real node, idle with %d volumes: %d KiB RSS in all LVMS processes:\n%s",
			strings.Count(tr.kubectlOK(t, "get", lvResource, "-o", "name"), "\n"), total, out)
		if total == 0 {
			t.Errorf("no lvms process found on the node: %q", out)
		}
	})

	step("rollback as the README says: LVMS stopped, what TopoLVM reads is as it left it", func(t *testing.T) {
		// Foreground: the operator's pod is gone when this returns, so it cannot make the DaemonSet again.
		tr.kubectlOK(t, "-n", msNamespace, "delete", "deployment", "lvms-operator", "--cascade=foreground", "--timeout=5m")
		tr.kubectlOK(t, "-n", msNamespace, "delete", "daemonset", "lvms-node-agent", "--wait=true", "--timeout=5m")
		if err := poll(5*time.Minute, func() bool {
			out, _ := tr.Kubectl("-n", msNamespace, "get", "pods", "-o", "name")
			return strings.TrimSpace(out) == ""
		}); err != nil {
			out, _ := tr.Kubectl("-n", msNamespace, "get", "pods", "-o", "wide")
			t.Fatalf("LVMS's pods are still there: %v\n%s", err, out)
		}
		if got := tr.GuestRunOK(t, "node-a", "cat", msLVMD); got != before["lvmd.yaml"] {
			t.Errorf("lvmd.yaml after LVMS:\n%s\nwas:\n%s", got, before["lvmd.yaml"])
		}
		have := lvs(t)
		for _, v := range []*topolvmstate.Volume{db, cache} {
			got := tr.kubectlOK(t, "get", lvResource, v.Name, "-o", "jsonpath={.status.volumeID} {.metadata.finalizers}")
			if want := fmt.Sprintf("%s [%q]", v.UID, names.LogicalVolumeFinalizer()); got != want || !slices.Contains(have, v.UID) {
				t.Errorf("for TopoLVM after a rollback, %s: %q (LV there: %v); want %q", v.Claim, got, slices.Contains(have, v.UID), want)
			}
		}
		// The running pods keep their volumes without LVMS.
		if out, err := tr.Kubectl("exec", "app", "--", "sh", "-c", "cd /db && sha256sum -c sum && cd /cache && sha256sum -c sum"); err != nil {
			t.Errorf("the app pod's volumes after LVMS stopped: %v\n%s", err, out)
		}
	})
}
