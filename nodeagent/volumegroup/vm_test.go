package volumegroup_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	lvmv2 "github.com/lvms-dev/lvms/api/lvm/v2alpha1"
	"github.com/lvms-dev/lvms/e2e/vm"
	"github.com/lvms-dev/lvms/nodeagent/blockdev"
	"github.com/lvms-dev/lvms/nodeagent/desired"
	"github.com/lvms-dev/lvms/nodeagent/lvm"
	"github.com/lvms-dev/lvms/nodeagent/lvm/lvmtest"
	"github.com/lvms-dev/lvms/nodeagent/selector"
	"github.com/lvms-dev/lvms/nodeagent/status"
	"github.com/lvms-dev/lvms/nodeagent/volumegroup"
)

// recordingFile holds the lvm2, lsblk and wipefs output of TestVMThinPoolLifecycle, recorded in the VM
// lane; TestReplay_ThinPoolLifecycle replays it on any host. Refresh it with
// LVMS_UPDATE_RECORDINGS=1 make test-vm VM_RUN=TestVMThinPoolLifecycle VM_PKGS=./nodeagent/volumegroup.
var recordingFile = filepath.Join("testdata", "vm-thinpool-lifecycle.json")

type recording struct {
	Disks   []string     `json:"disks"`
	Session *lvm.Session `json:"session"`
}

// TestVMThinPoolLifecycle runs on a real kernel with device-mapper: a thin pool with sizePercent next to a
// thick device class, pool growth after a device is added, pool metadata usage in status, deletion
// refused while a user LV exists and done when none does, and a forced wipe of a device that holds another
// volume group with an active LV.
func TestVMThinPoolLifecycle(t *testing.T) {
	if vm.InGuest() {
		disks, err := vm.Disks()
		if err != nil {
			t.Fatal(err)
		}
		rec := lvm.NewRecorder(lvm.OSExecutor{}, vm.RecordingSource(t.Name()))
		thinPoolScenario(t, lvm.Runner{DevicesFile: "lvms-vmtest.devices", Exec: rec}, disks[:4])
		data, err := json.Marshal(recording{Disks: disks[:4], Session: rec.Session()})
		if err != nil {
			t.Fatal(err)
		}
		vm.WriteTransfer(t, disks[4], data)
		return
	}
	out := filepath.Join(t.TempDir(), "transfer.img")
	vm.Run(t, vm.Options{Disks: []vm.Disk{{Size: 1 << 30}, {Size: 1 << 30}, {Size: 1 << 30}, {Size: 512 << 20}, {Path: out, Size: 8 << 20}}, Timeout: 15 * time.Minute})
	if t.Failed() || t.Skipped() {
		return
	}
	data := vm.ReadTransfer(t, out)
	if os.Getenv("LVMS_UPDATE_RECORDINGS") == "1" {
		var pretty recording
		if err := json.Unmarshal(data, &pretty); err != nil {
			t.Fatal(err)
		}
		b, _ := json.MarshalIndent(pretty, "", "  ")
		if err := os.WriteFile(recordingFile, append(b, '\n'), 0o644); err != nil {
			t.Fatal(err)
		}
		t.Logf("updated %s", recordingFile)
	}
}

// TestReplay_ThinPoolLifecycle replays the VM lane's recording: the same scenario, the same assertions,
// on a host without device-mapper and without root.
func TestReplay_ThinPoolLifecycle(t *testing.T) {
	data, err := os.ReadFile(recordingFile)
	if err != nil {
		t.Fatalf("%v: record it with LVMS_UPDATE_RECORDINGS=1 make test-vm VM_RUN=TestVMThinPoolLifecycle VM_PKGS=./nodeagent/volumegroup", err)
	}
	var rec recording
	if err := json.Unmarshal(data, &rec); err != nil {
		t.Fatal(err)
	}
	rp := lvmtest.Session(t, recordingFile, rec.Session)
	t.Logf("replaying %s", rp)
	thinPoolScenario(t, lvm.Runner{DevicesFile: "lvms-vmtest.devices", Exec: rp}, rec.Disks)
}

func byKName(t *testing.T, devs ...string) *selector.Selector {
	t.Helper()
	s, err := selector.FromV2(lvmv2.DeviceSelector{DeviceSelectorTerms: []lvmv2.DeviceSelectorTerm{{MatchExpressions: []lvmv2.DeviceSelectorRequirement{
		{Key: lvmv2.KeyKName, Operator: lvmv2.OpIn, Values: devs}}}}})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// thinPoolScenario is the lifecycle of one volume group with a thin and a thick device class.
func thinPoolScenario(t *testing.T, r lvm.Runner, disks []string) {
	ctx := context.Background()
	if err := r.EnsureDevicesFile(ctx); err != nil {
		t.Fatal(err)
	}
	caps := r.DetectCapabilities(ctx, lvm.TargetThinPool, lvm.TargetThin)
	if !caps.Has(lvm.TargetThinPool, lvm.TargetThin) {
		t.Fatalf("the VM kernel lacks thin pools: %+v", caps)
	}
	eng := &volumegroup.Engine{Runner: r}
	// lsblk, not /sys: the recording replays on a machine whose /sys shows other devices.
	settings := volumegroup.Settings{Discoverer: &blockdev.Discoverer{Runner: r, Lsblk: true}, Capabilities: caps, Scoped: true}
	pool := desired.ThinPool{Name: "pool", SizePercent: 50, OverprovisionRatio: 10}
	zero := uint64(0)
	node := func(deleting bool, devs ...string) *desired.Node {
		return &desired.Node{
			VolumeGroups: []desired.VolumeGroup{{Name: "vmvg", Source: desired.SourceLVMNode, Selector: byKName(t, devs...), ThinPools: []desired.ThinPool{pool}, Deleting: deleting}},
			DeviceClasses: []desired.DeviceClass{
				{Name: "thin", VolumeGroup: "vmvg", Source: desired.SourceLVMNode, Thin: &pool, Needs: []string{lvm.TargetThinPool, lvm.TargetThin}},
				{Name: "thick", VolumeGroup: "vmvg", Source: desired.SourceLVMNode, SpareGB: &zero, Needs: []string{lvm.TargetLinear}},
			},
		}
	}
	converge := func(n *desired.Node) (volumegroup.Result, volumegroup.Observation) {
		t.Helper()
		out, obs, err := eng.Converge(ctx, n, settings)
		if err != nil {
			t.Fatal(err)
		}
		return out.VolumeGroups[0], obs
	}
	poolExtents := func(obs volumegroup.Observation) (uint64, uint64) {
		vg, ok := obs.Report.VG("vmvg")
		lv, okLV := obs.Report.LV("vmvg", "pool")
		if !ok || !okLV || !lv.IsThinPool() || !lv.Active() {
			t.Fatalf("volume group %+v / pool %+v: want an active thin pool", vg, lv)
		}
		return lv.Size / vg.ExtentSize, vg.ExtentCount
	}

	// 1. A thin pool with sizePercent 50 next to a thick class.
	r1, obs := converge(node(false, disks[0], disks[1]))
	if r1.Phase != volumegroup.PhaseHealthy {
		t.Fatalf("first pass: %s: %s", r1.Phase, r1.Message)
	}
	got, total := poolExtents(obs)
	if want := total * 50 / 100; got != want {
		t.Errorf("pool has %d of %d extents, want %d (50%%)", got, total, want)
	}
	st := status.LVMNode(lvmv2.LVMNodeStatus{}, status.Inputs{Node: node(false, disks[0], disks[1]), Outcome: volumegroup.Outcome{VolumeGroups: []volumegroup.Result{r1}},
		Observation: obs, Capabilities: caps, LVMD: status.LVMD{OK: true, Reason: status.ReasonWritten, Message: "ok"}, Now: metav1.Now()})
	vols := st.VolumeGroups[0].Volumes
	if len(vols) != 1 || vols[0].MetadataPercent == "" || vols[0].DataPercent == "" || !strings.HasPrefix(vols[0].Attributes, "twi-a") {
		t.Errorf("status volumes = %+v; want the pool with data and metadata usage", vols)
	}
	for _, dc := range st.DeviceClasses {
		if dc.State != lvmv2.StateHealthy {
			t.Errorf("device class %s = %s: %s", dc.Name, dc.State, dc.Message)
		}
	}
	// Both classes provision: a thick LV beside the pool, a thin LV in it.
	if err := r.CreateLV(ctx, "vmvg", "thick1", 64<<20); err != nil {
		t.Fatal(err)
	}
	if err := r.CreateThinLV(ctx, "vmvg", "pool", "thin1", 1<<30); err != nil {
		t.Fatal(err)
	}

	// The pool fills past autoextendThreshold (80%): the agent grows it by autoextendPercent (20%) into the
	// volume group's free space. (Through the runner, so the replay sees the same pool.)
	before, _ := poolExtents(obs)
	fill := before * 85 / 100 // 4 MiB extents, 4 MiB blocks
	if _, err := r.Run(ctx, "dd", "if=/dev/zero", "of=/dev/vmvg/thin1", "bs=4M", fmt.Sprintf("count=%d", fill), "oflag=direct", "status=none"); err != nil {
		t.Fatal(err)
	}
	ra, obs := converge(node(false, disks[0], disks[1]))
	after, _ := poolExtents(obs)
	if after != before+before*20/100 {
		t.Errorf("pool has %d extents after filling %d of %d, want %d (grown by 20%%): %s: %s", after, fill, before, before+before*20/100, ra.Phase, ra.Message)
	}
	var grew bool
	for _, e := range ra.Events {
		grew = grew || e.Reason == "ThinPoolAutoextended"
	}
	if !grew {
		t.Errorf("events %+v: want ThinPoolAutoextended", ra.Events)
	}

	// 2. A device is added: the volume group and the pool grow.
	r2, obs := converge(node(false, disks[:3]...))
	if r2.Phase != volumegroup.PhaseHealthy {
		t.Fatalf("after adding %s: %s: %s", disks[2], r2.Phase, r2.Message)
	}
	grown, total2 := poolExtents(obs)
	if total2 <= total || grown != total2*50/100 {
		t.Errorf("pool has %d of %d extents after the volume group grew from %d; want 50%%", grown, total2, total)
	}

	// 3. Deletion waits for the user's volumes.
	r3, obs := converge(node(true, disks[:3]...))
	if r3.Phase != volumegroup.PhaseManualCleanupRequired || !strings.Contains(r3.Message, "thick1, thin1") {
		t.Fatalf("deletion with volumes: %s: %s", r3.Phase, r3.Message)
	}
	if _, ok := obs.Report.VG("vmvg"); !ok {
		t.Fatal("the volume group was removed although it holds volumes")
	}
	for _, lv := range []string{"thin1", "thick1"} {
		if err := r.RemoveLV(ctx, "vmvg", lv); err != nil {
			t.Fatal(err)
		}
	}
	// A volume created after the pass read the node (the report it works on is stale) stops the deletion:
	// the engine reads the volume group again under the lock lvmd creates volumes under.
	stale, err := volumegroup.Observe(ctx, settings.Discoverer, r)
	if err != nil {
		t.Fatal(err)
	}
	if err := r.CreateThinLV(ctx, "vmvg", "pool", "late", 1<<30); err != nil {
		t.Fatal(err)
	}
	late := eng.Reconcile(ctx, volumegroup.Input{Node: node(true, disks[:3]...), Inventory: stale.Inventory, Report: stale.Report,
		Capabilities: caps, Scoped: true}).VolumeGroups[0]
	if late.Phase != volumegroup.PhaseManualCleanupRequired || !strings.Contains(late.Message, "late") {
		t.Fatalf("deletion racing a new volume: %s: %s", late.Phase, late.Message)
	}
	if err := r.RemoveLV(ctx, "vmvg", "late"); err != nil {
		t.Fatalf("the volume created during the deletion is gone: %v", err)
	}
	r4, obs := converge(node(true, disks[:3]...))
	if r4.Phase != volumegroup.PhaseDeleted {
		t.Fatalf("deletion without volumes: %s: %s", r4.Phase, r4.Message)
	}
	if _, ok := obs.Report.VG("vmvg"); ok || len(obs.Report.PVs) != 0 {
		t.Errorf("after deletion LVM still reports %+v %+v", obs.Report.VGs, obs.Report.PVs)
	}

	// 4. A forced wipe of a device that holds someone else's volume group with an active LV, named by its
	// kernel name: refused, nothing touched.
	foreign := lvm.Runner{Exec: r.Exec, DevicesFile: "foreign.devices"}
	if err := foreign.EnsureDevicesFile(ctx); err != nil {
		t.Fatal(err)
	}
	if err := foreign.VGCreate(ctx, "foreign", nil, []string{disks[3]}); err != nil {
		t.Fatal(err)
	}
	if err := foreign.CreateLV(ctx, "foreign", "data", 64<<20); err != nil {
		t.Fatal(err)
	}
	wipes := &transientWipes{}
	eng.Wipes = wipes
	wipeNode := &desired.Node{VolumeGroups: []desired.VolumeGroup{{Name: "wipevg", Source: desired.SourceLVMNode, Selector: byKName(t, disks[3]), ForceWipe: true}}}
	r5, obs := converge(wipeNode)
	if r5.Phase == volumegroup.PhaseHealthy || len(obs.Report.PVsOf("wipevg")) != 0 || len(wipes.at) != 0 || !strings.Contains(r5.Message, "kernel name") {
		t.Fatalf("forced wipe by kernel name: %s: %s; PVs %+v; wipes %v", r5.Phase, r5.Message, obs.Report.PVsOf("wipevg"), wipes.at)
	}
	for _, e := range r5.Events {
		if e.Reason == "DeviceWiped" {
			t.Errorf("event %s: %s", e.Reason, e.Message)
		}
	}
	rep, err := foreign.FullReport(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := rep.LV("foreign", "data"); !ok {
		t.Error("the foreign volume group lost its LV")
	}
	if err := foreign.RemoveLV(ctx, "foreign", "data"); err != nil {
		t.Fatal(err)
	}
	if err := foreign.VGRemove(ctx, "foreign"); err != nil {
		t.Fatal(err)
	}
}

// transientWipes keeps wipe records for one scenario.
type transientWipes struct {
	at map[string]volumegroup.WipeRecord
}

func (w *transientWipes) Wiped(vg, path string) (volumegroup.WipeRecord, bool, error) {
	r, ok := w.at[vg+" "+path]
	return r, ok, nil
}

func (w *transientWipes) Begin(_ context.Context, vg, path string, at time.Time) error {
	return w.put(vg+" "+path, volumegroup.WipeRecord{At: at})
}

func (w *transientWipes) Record(_ context.Context, vg, path string, at time.Time) error {
	return w.put(vg+" "+path, volumegroup.WipeRecord{At: at, Done: true})
}

func (w *transientWipes) put(key string, r volumegroup.WipeRecord) error {
	if w.at == nil {
		w.at = map[string]volumegroup.WipeRecord{}
	}
	w.at[key] = r
	return nil
}

// writeTransfer writes data, length-prefixed, to a raw disk the host reads after the VM stopped.
