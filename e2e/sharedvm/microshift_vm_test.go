package sharedvm

import (
	"bytes"
	"cmp"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"golang.org/x/sys/unix"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	lvmv1 "github.com/lvms-dev/lvms/api/lvm/v1alpha1"
	"github.com/lvms-dev/lvms/api/topolvm/driver"
	topolvmv1 "github.com/lvms-dev/lvms/api/topolvm/v1"
	"github.com/lvms-dev/lvms/e2e/testenv"
	"github.com/lvms-dev/lvms/e2e/topolvmstate"
	"github.com/lvms-dev/lvms/e2e/vm"
	"github.com/lvms-dev/lvms/operator/optest"
)

// The MicroShift take-over: a node in the state TopoLVM leaves behind, then LVMS's own processes.
const (
	edgeNode     = "edge"
	edgeVG       = "rhel"
	edgeLVMD     = "/run/lvms-test/lvmd.yaml"
	edgeCSI      = "/run/lvms-test/csi.sock"
	volumesFile  = "topolvm-volumes"
	newVolume    = "new-volume"
	agentRSSFile = "agent-rss"
)

// edgeLVMDConfig is lvmd.yaml as MicroShift writes it.
var edgeLVMDConfig = topolvmstate.LVMDConfig(edgeVG)

// edgeVolume is one of TopoLVM's volumes on the edge node.
type edgeVolume struct {
	claim, class, fs string
	size             int64
	uid              string // the LogicalVolume's UID: the volume ID and the LV's name
	object           string // the LogicalVolume's and the PV's name (host side only)
}

func (v edgeVolume) String() string {
	return fmt.Sprintf("%s %s %s %d %s", v.claim, v.class, cmp.Or(v.fs, "-"), v.size, v.uid)
}

func parseEdgeVolume(line string) edgeVolume {
	f := strings.Fields(line)
	size, _ := strconv.ParseInt(f[3], 10, 64)
	fs := f[2]
	if fs == "-" {
		fs = ""
	}
	return edgeVolume{claim: f[0], class: f[1], fs: fs, size: size, uid: f[4]}
}

func edgeVolumes() []edgeVolume {
	vols := []edgeVolume{
		{claim: "db", class: "default", fs: "xfs", size: 400 << 20},
		{claim: "cache", class: "thin", fs: "ext4", size: 512 << 20},
		{claim: "raw", class: "default", size: 64 << 20},
	}
	for i := range 7 {
		vols = append(vols, edgeVolume{claim: fmt.Sprintf("extra-%d", i), class: "thin", size: 64 << 20})
	}
	return vols
}

// TestVMMicroShiftTakeover: an edge node upgraded from TopoLVM. The node holds what TopoLVM left — MicroShift's
// lvmd.yaml, thick and thin LVs with data named after their LogicalVolumes' UIDs — and the API server
// TopoLVM's LogicalVolumes, PVs, bound PVCs, its StorageClass and node label. Then LVMS starts in MicroShift
// mode, as its real processes: `lvms operator` on the host (ExternalConfiguration LVMCluster) and `lvms
// nodeagent --configuration-policy=ExternalConfiguration` in the VM. Nothing that exists changes; every
// volume publishes through the agent's CSI socket with its data; a claim grows (LV and file system), a claim
// is deleted (its LV goes), a new claim provisions; TopoLVM's state for a rollback is as it was. The
// idle memory of both processes with 10 volumes is the figure.
//
// Once per group: topolvm.io, and topolvm.cybozu.com for a cluster still on TopoLVM's legacy group, which
// both processes detect at start and serve without a flag.
func TestVMMicroShiftTakeover(t *testing.T) {
	if !vm.InGuest() {
		t.Parallel()
	}
	for _, legacy := range []bool{false, true} {
		t.Run(driver.New(legacy).Driver(), func(t *testing.T) {
			if vm.InGuest() {
				edgeGuest(t)
				return
			}
			takeover(t, driver.New(legacy))
		})
	}
}

func takeover(t *testing.T, names driver.Names) {
	bin := buildBinary(t)
	env, ns, opts := startCluster(t, []string{edgeNode}, filepath.Join(t.TempDir(), "disk.img"))
	opts[0].Env[envBinary] = bin
	opts[0].Env[envAgentArgs] = strings.Join([]string{"--configuration-policy=ExternalConfiguration", "--lvm-devices-file=", "--lvmd-config=" + edgeLVMD, "--csi-socket=" + edgeCSI}, " ")
	ctx := context.Background()
	scheme, err := names.Scheme()
	must(t, err)
	c, err := client.New(env.Config, client.Options{Scheme: scheme}) // LogicalVolumes in the group's own API
	must(t, err)

	// What TopoLVM left in the API.
	optest.Node(t, c, edgeNode, map[string]string{names.TopologyKey(): edgeNode})
	wffc, expand := storagev1.VolumeBindingWaitForFirstConsumer, true
	sc := &storagev1.StorageClass{ObjectMeta: metav1.ObjectMeta{Name: "topolvm-provisioner"}, Provisioner: names.Driver(),
		Parameters: map[string]string{names.DeviceClassParam(): "default", driver.FSTypeParam: "xfs"}, VolumeBindingMode: &wffc, AllowVolumeExpansion: &expand}
	must(t, c.Create(ctx, sc))
	t.Cleanup(func() { _ = c.Delete(ctx, sc) })
	vols := edgeVolumes()
	var lines []string
	for i := range vols {
		v := topolvmstate.Volume{Claim: vols[i].claim, Class: vols[i].class, FS: vols[i].fs, Size: vols[i].size}
		must(t, v.Create(ctx, c, names, ns, sc.Name, edgeNode))
		vols[i].uid, vols[i].object = v.UID, v.Name
		lines = append(lines, vols[i].String())
	}
	must(t, c.Create(ctx, &lvmv1.LVMCluster{ObjectMeta: metav1.ObjectMeta{Name: "lvms", Namespace: ns},
		Spec: lvmv1.LVMClusterSpec{ConfigurationPolicy: lvmv1.ConfigurationPolicyExternal}}))
	running := vm.StartMany(t, opts)
	defer running.Wait()
	defer running.Signal("edge-done")
	must(t, os.WriteFile(filepath.Join(running.SharedDir(), volumesFile), []byte(strings.Join(lines, "\n")+"\n"), 0o644))
	running.Signal("objects-ready")
	wait := func(name string) {
		t.Helper()
		wctx, cancel := context.WithTimeout(ctx, 8*time.Minute)
		defer cancel()
		if err := running.WaitSignal(wctx, name); err != nil {
			t.Fatalf("wait for %q: %v", name, err)
		}
	}

	// LVMS's operator, as MicroShift's overlay runs it.
	operatorPID := startOperator(t, bin, env.Kubeconfig(t), ns)
	wait("agent-up")
	optest.Eventually(t, "the agent's report of the host lvmd.yaml and the node's capacity", func() (bool, string) {
		st := &lvmv1.LVMVolumeGroupNodeStatus{}
		node := &corev1.Node{}
		if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: edgeNode}, st); err != nil {
			return false, err.Error()
		}
		must(t, c.Get(ctx, client.ObjectKey{Name: edgeNode}, node))
		cond := optest.Condition(st.Status.Conditions, "LVMDConfigured")
		_, annotated := node.Annotations[names.CapacityAnnotation("default")]
		return cond != nil && cond.Status == metav1.ConditionTrue && annotated, fmt.Sprintf("condition %+v, capacity annotated %v", cond, annotated)
	})
	for _, v := range vols {
		lv := &topolvmv1.LogicalVolume{}
		must(t, c.Get(ctx, client.ObjectKey{Name: v.object}, lv))
		if lv.Status.VolumeID != v.uid || lv.Status.Code != 0 || !slices.Equal(lv.Finalizers, []string{names.LogicalVolumeFinalizer()}) || lv.Spec.Size.Value() != v.size {
			t.Errorf("LVMS changed TopoLVM's LogicalVolume %s: spec %+v, status %+v, finalizers %v", lv.Name, lv.Spec, lv.Status, lv.Finalizers)
		}
	}
	running.Signal("checked-unchanged")
	wait("published")

	// Grow db through its claim: the operator's provisioner asks the agent for the LV, the node for the file system.
	db := &corev1.PersistentVolumeClaim{}
	must(t, c.Get(ctx, client.ObjectKey{Namespace: ns, Name: "db"}, db))
	patch := client.MergeFrom(db.DeepCopy())
	db.Spec.Resources.Requests[corev1.ResourceStorage] = *resource.NewQuantity(600<<20, resource.BinarySI)
	must(t, c.Patch(ctx, db, patch))
	optest.Eventually(t, "db's PV grown to 600Mi", func() (bool, string) {
		pv := &corev1.PersistentVolume{}
		must(t, c.Get(ctx, client.ObjectKey{Name: vols[0].object}, pv))
		q := pv.Spec.Capacity[corev1.ResourceStorage]
		return q.Value() >= 600<<20, q.String()
	})
	running.Signal("expanded")
	wait("grown")

	// Delete raw through its claim: the LV goes.
	raw := &corev1.PersistentVolumeClaim{}
	must(t, c.Get(ctx, client.ObjectKey{Namespace: ns, Name: "raw"}, raw))
	optest.DeleteVolume(t, c, raw)
	optest.Eventually(t, "raw's PV and LogicalVolume removed", func() (bool, string) {
		pv := &corev1.PersistentVolume{}
		err := c.Get(ctx, client.ObjectKey{Name: vols[2].object}, pv)
		if err == nil && pv.DeletionTimestamp != nil {
			optest.DeleteVolume(t, c, pv) // plays pv-protection
		}
		lvErr := c.Get(ctx, client.ObjectKey{Name: vols[2].object}, &topolvmv1.LogicalVolume{})
		return apierrors.IsNotFound(err) && apierrors.IsNotFound(lvErr), fmt.Sprintf("PV: %v, LogicalVolume: %v", err, lvErr)
	})
	running.Signal("deleted")

	// A new claim next to TopoLVM's volumes.
	block := corev1.PersistentVolumeBlock
	fresh := &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "fresh",
		Annotations: map[string]string{driver.SelectedNodeAnnotation: edgeNode}},
		Spec: corev1.PersistentVolumeClaimSpec{StorageClassName: &sc.Name, AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce}, VolumeMode: &block,
			Resources: corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: *resource.NewQuantity(64<<20, resource.BinarySI)}}}}
	must(t, c.Create(ctx, fresh))
	pv := &corev1.PersistentVolume{}
	optest.Eventually(t, "the new claim's PV", func() (bool, string) {
		err := c.Get(ctx, client.ObjectKey{Name: "pvc-" + string(fresh.UID)}, pv)
		return err == nil, fmt.Sprint(err)
	})
	must(t, os.WriteFile(filepath.Join(running.SharedDir(), newVolume), []byte(pv.Spec.CSI.VolumeHandle), 0o644))
	running.Signal("provisioned")
	wait("idle-measured")

	// The figure: both processes' memory, idle with 10 volumes (9 of TopoLVM's and the new one).
	agentRSS, _ := os.ReadFile(filepath.Join(running.SharedDir(), agentRSSFile))
	t.Logf("MicroShift mode (%s), idle with 10 volumes: node agent %s KiB RSS (in the VM), operator %d KiB RSS (on the host)",
		names.Driver(), strings.TrimSpace(string(agentRSS)), rssKiB(t, operatorPID))
	for _, v := range []edgeVolume{vols[0], vols[1]} {
		lv := &topolvmv1.LogicalVolume{}
		must(t, c.Get(ctx, client.ObjectKey{Name: v.object}, lv))
		if lv.Status.VolumeID != v.uid || !slices.Equal(lv.Finalizers, []string{names.LogicalVolumeFinalizer()}) {
			t.Errorf("for TopoLVM after a rollback, %s: volume ID %s, finalizers %v", lv.Name, lv.Status.VolumeID, lv.Finalizers)
		}
	}
	wait("guest-done")
}

// startOperator runs `lvms operator` on the host with the MicroShift overlay's flags until the test ends.
func startOperator(t *testing.T, bin, kubeconfig, ns string) int {
	t.Helper()
	cmd := exec.Command(bin, "operator", "--kubeconfig", kubeconfig, "--namespace", ns, "--node-agent-image", "quay.io/lvms/lvms:test",
		"--metrics-bind-address=0", "--console-bind-address=0", "--health-probe-bind-address=0", "--csi-socket=",
		"--lvmd-config-dir=/var/lib/microshift/lvms")
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	must(t, cmd.Start())
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		_ = cmd.Wait()
		if t.Failed() {
			t.Logf("lvms operator:\n%s", out.String())
		}
	})
	return cmd.Process.Pid
}

// rssKiB is a process's resident memory in KiB.
func rssKiB(t *testing.T, pid int) int64 {
	t.Helper()
	kib, err := testenv.RSSKiB(pid)
	must(t, err)
	return kib
}

// edgeGuest is the edge node: TopoLVM's state on the disk, then LVMS's node agent over it.
func edgeGuest(t *testing.T) {
	vm.WaitSignal(t, "objects-ready")
	b, err := os.ReadFile(filepath.Join(vm.SharedDir(), volumesFile))
	must(t, err)
	var vols []edgeVolume
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		vols = append(vols, parseEdgeVolume(line))
	}
	disks, err := vm.Disks()
	if err != nil || len(disks) != 1 {
		t.Fatalf("disks %v: %v", disks, err)
	}
	run := func(name string, args ...string) {
		t.Helper()
		if out, err := exec.Command(name, args...).CombinedOutput(); err != nil {
			t.Fatalf("%s %s: %v: %s", name, strings.Join(args, " "), err, out)
		}
	}
	run("pvcreate", "-y", disks[0])
	run("vgcreate", edgeVG, disks[0])
	run("lvcreate", "-y", "--type", "thin-pool", "-L", "1536M", "-n", "thin", edgeVG)
	payload := func(v edgeVolume) []byte { return bytes.Repeat([]byte(v.claim+"\n"), 64<<10) }
	for _, v := range vols {
		run("lvcreate", topolvmstate.LVCreateArgs(edgeVG, v.class, v.uid, v.size)...)
		dev := "/dev/" + edgeVG + "/" + v.uid
		if v.fs == "" {
			writeAt(t, dev, payload(v))
			continue
		}
		run("mkfs."+v.fs, dev)
		dir := t.TempDir()
		run("mount", dev, dir)
		writeAt(t, filepath.Join(dir, "data"), payload(v))
		run("umount", dir)
	}
	must(t, os.MkdirAll(filepath.Dir(edgeLVMD), 0o755))
	must(t, os.WriteFile(edgeLVMD, []byte(edgeLVMDConfig), 0o644))
	t.Logf("TopoLVM's state: %d LVs on %s, MicroShift's lvmd.yaml", len(vols), edgeVG)

	pid := startAgent(t)
	conn, err := grpc.NewClient("unix://"+edgeCSI, grpc.WithTransportCredentials(insecure.NewCredentials()))
	must(t, err)
	defer conn.Close()
	node := csi.NewNodeClient(conn)
	ctx := context.Background()
	for deadline := time.Now().Add(2 * time.Minute); ; time.Sleep(time.Second) {
		if _, err := node.NodeGetInfo(ctx, &csi.NodeGetInfoRequest{}); err == nil {
			break
		} else if time.Now().After(deadline) {
			t.Fatalf("the agent's CSI socket never answered: %v", err)
		}
	}
	vm.Signal(t, "agent-up")
	vm.WaitSignal(t, "checked-unchanged")

	dir := t.TempDir()
	capability := func(v edgeVolume) *csi.VolumeCapability {
		c := &csi.VolumeCapability{AccessMode: &csi.VolumeCapability_AccessMode{Mode: csi.VolumeCapability_AccessMode_SINGLE_NODE_WRITER}}
		if v.fs == "" {
			c.AccessType = &csi.VolumeCapability_Block{Block: &csi.VolumeCapability_BlockVolume{}}
		} else {
			c.AccessType = &csi.VolumeCapability_Mount{Mount: &csi.VolumeCapability_MountVolume{FsType: v.fs}}
		}
		return c
	}
	target := func(v edgeVolume) string { return filepath.Join(dir, v.claim) }
	for _, v := range vols {
		if _, err := node.NodePublishVolume(ctx, &csi.NodePublishVolumeRequest{VolumeId: v.uid, TargetPath: target(v), VolumeCapability: capability(v)}); err != nil {
			t.Fatalf("publish TopoLVM's %s: %v", v.claim, err)
		}
		path := target(v)
		if v.fs != "" {
			path = filepath.Join(path, "data")
		}
		readAt(t, path, payload(v))
	}
	t.Logf("all %d TopoLVM volumes published by LVMS's agent with their data", len(vols))
	vm.Signal(t, "published")

	vm.WaitSignal(t, "expanded")
	db := vols[0]
	var before unix.Statfs_t
	must(t, unix.Statfs(target(db), &before))
	if _, err := node.NodeExpandVolume(ctx, &csi.NodeExpandVolumeRequest{VolumeId: db.uid, VolumePath: target(db), VolumeCapability: capability(db)}); err != nil {
		t.Fatalf("grow db's file system: %v", err)
	}
	var after unix.Statfs_t
	must(t, unix.Statfs(target(db), &after))
	if after.Blocks <= before.Blocks {
		t.Errorf("db's file system has %d blocks after growing, %d before", after.Blocks, before.Blocks)
	}
	readAt(t, filepath.Join(target(db), "data"), payload(db))
	vm.Signal(t, "grown")

	raw := vols[2]
	if _, err := node.NodeUnpublishVolume(ctx, &csi.NodeUnpublishVolumeRequest{VolumeId: raw.uid, TargetPath: target(raw)}); err != nil {
		t.Fatal(err)
	}
	vm.WaitSignal(t, "deleted")
	lvs := func() string {
		out, err := exec.Command("lvs", "--noheadings", "-o", "lv_name", edgeVG).CombinedOutput()
		must(t, err)
		return string(out)
	}
	if strings.Contains(lvs(), raw.uid) {
		t.Errorf("raw's claim was deleted, but its LV %s is still there", raw.uid)
	}
	vm.WaitSignal(t, "provisioned")
	fresh, err := os.ReadFile(filepath.Join(vm.SharedDir(), newVolume))
	must(t, err)
	if !strings.Contains(lvs(), string(fresh)) {
		t.Errorf("the new claim's LV %s is not in %s: %s", fresh, edgeVG, lvs())
	}

	time.Sleep(30 * time.Second) // idle: one resync at most; memory is read, not timed
	must(t, os.WriteFile(filepath.Join(vm.SharedDir(), agentRSSFile), []byte(strconv.FormatInt(rssKiB(t, pid), 10)), 0o644))
	vm.Signal(t, "idle-measured")

	for _, v := range vols {
		if v != raw {
			_, _ = node.NodeUnpublishVolume(ctx, &csi.NodeUnpublishVolumeRequest{VolumeId: v.uid, TargetPath: target(v)})
		}
	}
	if b, err := os.ReadFile(edgeLVMD); err != nil || string(b) != edgeLVMDConfig {
		t.Errorf("the host's lvmd.yaml changed: %q, %v", b, err)
	}
	vm.Signal(t, "guest-done")
	vm.WaitSignal(t, "edge-done")
}

func writeAt(t *testing.T, path string, b []byte) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY, 0o644)
	must(t, err)
	defer f.Close()
	if _, err := f.Write(b); err != nil {
		t.Fatal(err)
	}
	must(t, f.Sync())
}

func readAt(t *testing.T, path string, want []byte) {
	t.Helper()
	f, err := os.Open(path)
	must(t, err)
	defer f.Close()
	got := make([]byte, len(want))
	if _, err := f.ReadAt(got, 0); err != nil {
		t.Fatalf("read %s: %v", path, err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("%s: data differs from what TopoLVM's volume held", path)
	}
}
