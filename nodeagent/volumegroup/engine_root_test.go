package volumegroup

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"syscall"
	"testing"
	"time"

	lvmv2 "github.com/lvms-dev/lvms/api/lvm/v2alpha1"
	"github.com/lvms-dev/lvms/nodeagent/blockdev"
	"github.com/lvms-dev/lvms/nodeagent/desired"
	"github.com/lvms-dev/lvms/nodeagent/loopdev"
	"github.com/lvms-dev/lvms/nodeagent/lvm"
	"github.com/lvms-dev/lvms/nodeagent/selector"
)

const diskSize = 256 << 20

// agent is one simulated node agent on this host: its own devices file, its own engine.
type agent struct {
	log    *commandLog
	runner lvm.Runner
	engine *Engine
	s      Settings
}

func newAgent(t *testing.T, prefix, name string, wipes WipeRecords) *agent {
	log := &commandLog{}
	r := loopdev.Runner(t, prefix, name, log)
	return &agent{log: log, runner: r, engine: &Engine{Runner: r, Wipes: wipes},
		s: Settings{Discoverer: &blockdev.Discoverer{Runner: r}, Scoped: true}}
}

func (a *agent) converge(t *testing.T, n *desired.Node) (Outcome, Observation) {
	t.Helper()
	out, obs, err := a.engine.Converge(context.Background(), n, a.s)
	if err != nil {
		t.Fatal(err)
	}
	return out, obs
}

func TestEngine_CreateExtendAndIdle(t *testing.T) {
	loopdev.RequireRoot(t)
	dir := loopdev.Dir(t)
	a, b, c := loopdev.Attach(t, dir, diskSize, false), loopdev.Attach(t, dir, diskSize, false), loopdev.Attach(t, dir, diskSize, false)
	prefix := loopdev.Prefix(t)
	ag := newAgent(t, prefix, "node", nil)
	vgName := prefix + "-vg"

	out, obs := ag.converge(t, node(desired.VolumeGroup{Name: vgName, Selector: knameSelector(t, a, b)}))
	r := out.VolumeGroups[0]
	if r.Phase != PhaseHealthy {
		t.Fatalf("phase = %s: %s", r.Phase, r.Message)
	}
	vg, ok := obs.Report.VG(vgName)
	if !ok || !vg.HasTag(lvm.OwnerTag) || !reflect.DeepEqual(pvNames(obs.Report, vgName), sortedDevs(a, b)) {
		t.Fatalf("volume group %+v (found %v), PVs %v; want it tagged %s on %s and %s", vg, ok, pvNames(obs.Report, vgName), lvm.OwnerTag, a, b)
	}
	if len(r.Events) == 0 || r.Events[0].Reason != "VolumeGroupCreated" {
		t.Errorf("events = %+v", r.Events)
	}

	// A device is added to the selector: the volume group grows.
	out, obs = ag.converge(t, node(desired.VolumeGroup{Name: vgName, Selector: knameSelector(t, a, b, c)}))
	if got := pvNames(obs.Report, vgName); !reflect.DeepEqual(got, sortedDevs(a, b, c)) || out.VolumeGroups[0].Phase != PhaseHealthy {
		t.Fatalf("after adding %s: PVs %v, phase %s (%s)", c, got, out.VolumeGroups[0].Phase, out.VolumeGroups[0].Message)
	}

	// Nothing to do: a pass only looks.
	ag.log.reset()
	out, _ = ag.converge(t, node(desired.VolumeGroup{Name: vgName, Selector: knameSelector(t, a, b, c)}))
	if out.Changed || len(out.VolumeGroups[0].Events) != 0 {
		t.Errorf("idle pass changed something: %+v", out.VolumeGroups[0].Events)
	}
	for _, l := range ag.log.ran {
		if !strings.HasPrefix(l, "lsblk ") && !strings.HasPrefix(l, "wipefs --no-act") && !strings.HasPrefix(l, "lvm fullreport") && !strings.HasPrefix(l, "blkid -p") {
			t.Errorf("idle pass ran %q", l)
		}
	}
}

func TestEngine_TwoAgentsSeeOnlyTheirDevices(t *testing.T) {
	loopdev.RequireRoot(t)
	dir := loopdev.Dir(t)
	a1, a2 := loopdev.Attach(t, dir, diskSize, false), loopdev.Attach(t, dir, diskSize, false)
	b1 := loopdev.Attach(t, dir, diskSize, false)
	prefix := loopdev.Prefix(t)
	nodeA, nodeB := newAgent(t, prefix, "node-a", nil), newAgent(t, prefix, "node-b", nil)

	outA, obsA := nodeA.converge(t, node(desired.VolumeGroup{Name: prefix + "-a", Selector: knameSelector(t, a1, a2)}))
	if outA.VolumeGroups[0].Phase != PhaseHealthy {
		t.Fatalf("node-a: %s", outA.VolumeGroups[0].Message)
	}
	// node-b also names a1, which node-a owns.
	outB, obsB := nodeB.converge(t, node(desired.VolumeGroup{Name: prefix + "-b", Selector: knameSelector(t, b1, a1)}))
	rb := outB.VolumeGroups[0]
	if rb.Phase != PhaseHealthy || !reflect.DeepEqual(pvNames(obsB.Report, prefix+"-b"), []string{b1}) {
		t.Fatalf("node-b: phase %s (%s), PVs %v", rb.Phase, rb.Message, pvNames(obsB.Report, prefix+"-b"))
	}
	ex, ok := excludedOf(rb, a1)
	if !ok || !reflect.DeepEqual(ex.Codes(), []string{string(lvmv2.ReasonOtherVolumeGroup)}) ||
		!strings.Contains(ex.Messages()[0], "is not in this node agent's LVM devices file") {
		t.Errorf("node-b's view of %s = %+v; want OtherVolumeGroup", a1, ex)
	}
	if _, seen := obsB.Report.VG(prefix + "-a"); seen {
		t.Error("node-b sees node-a's volume group")
	}
	if _, err := nodeA.runner.FullReport(context.Background()); err != nil {
		t.Fatal(err)
	}
	repA, _ := nodeA.runner.FullReport(context.Background())
	if _, seen := repA.VG(prefix + "-b"); seen || len(obsA.Report.VGs) != 1 {
		t.Errorf("node-a sees %v; want only its own volume group", repA.VGs)
	}
}

func TestEngine_ForeignSignatureExcluded(t *testing.T) {
	loopdev.RequireRoot(t)
	dir := loopdev.Dir(t)
	clean, used := loopdev.Attach(t, dir, diskSize, false), loopdev.Attach(t, dir, diskSize, false)
	loopdev.Run(t, "mkfs.ext4", "-q", used)
	prefix := loopdev.Prefix(t)
	ag := newAgent(t, prefix, "node", nil)
	out, obs := ag.converge(t, node(desired.VolumeGroup{Name: prefix + "-vg", Selector: knameSelector(t, clean, used)}))
	r := out.VolumeGroups[0]
	if got := excludedCodes(r, used); !reflect.DeepEqual(got, []string{string(lvmv2.ReasonForeignSignature)}) {
		t.Errorf("%s excluded with %v, want ForeignSignature", used, got)
	}
	if !reflect.DeepEqual(pvNames(obs.Report, prefix+"-vg"), []string{clean}) || !inventoryHas(obs.Inventory, used, "ext4") {
		t.Errorf("PVs %v; the ext4 device must be untouched", pvNames(obs.Report, prefix+"-vg"))
	}
}

func TestEngine_ForceWipeExactlyOnce(t *testing.T) {
	loopdev.RequireRoot(t)
	dir := loopdev.Dir(t)
	disk, mounted := loopdev.Attach(t, dir, diskSize, false), loopdev.Attach(t, dir, diskSize, false)
	diskID, mountedID := loopdev.ByIDLink(t, disk), loopdev.ByIDLink(t, mounted)
	loopdev.Run(t, "mkfs.ext4", "-q", disk)
	loopdev.Run(t, "mkfs.ext4", "-q", mounted)
	mnt := filepath.Join(dir, "mnt")
	if err := os.Mkdir(mnt, 0o755); err != nil {
		t.Fatal(err)
	}
	loopdev.Run(t, "mount", mounted, mnt)
	t.Cleanup(func() { loopdev.Run(t, "umount", mnt) })

	prefix := loopdev.Prefix(t)
	vgName := prefix + "-vg"
	records := &memWipes{}
	want := node(desired.VolumeGroup{Name: vgName, Selector: pathSelector(t, diskID, mountedID), ForceWipe: true})
	ag := newAgent(t, prefix, "node", records)
	out, obs := ag.converge(t, want)
	r := out.VolumeGroups[0]
	if ag.log.count("wipefs --all --force "+disk) != 1 || ag.log.count("wipefs --all --force "+mounted) != 0 {
		t.Errorf("wipes: %v", ag.log.ran)
	}
	if rec, ok, _ := records.Wiped(vgName, diskID); !ok || !rec.Done || r.Wiped[disk].IsZero() {
		t.Errorf("wipe of %s not recorded as done: %+v", disk, rec)
	}
	if !reflect.DeepEqual(pvNames(obs.Report, vgName), []string{disk}) {
		t.Fatalf("PVs %v, want the wiped %s (phase %s: %s)", pvNames(obs.Report, vgName), disk, r.Phase, r.Message)
	}
	if got := excludedCodes(r, mounted); !reflect.DeepEqual(got, []string{string(lvmv2.ReasonMounted)}) {
		t.Errorf("mounted device: %v", got)
	}

	// The device leaves the volume group and gets a filesystem again; a restarted agent (new engine, same
	// records) must not wipe it a second time.
	if _, err := ag.runner.LVMCmd(context.Background(), "vgremove", "-y", vgName); err != nil {
		t.Fatal(err)
	}
	if err := ag.runner.PVRemove(context.Background(), disk); err != nil {
		t.Fatal(err)
	}
	loopdev.Run(t, "mkfs.ext4", "-q", disk)
	restarted := newAgent(t, prefix, "node", records)
	restarted.runner = ag.runner
	restarted.engine.Runner, restarted.s.Discoverer.Runner = ag.runner, ag.runner
	ag.log.reset()
	out, _ = restarted.converge(t, want)
	r = out.VolumeGroups[0]
	if n := ag.log.count("wipefs --all"); n != 0 {
		t.Errorf("wiped again: %v", ag.log.ran)
	}
	if got := excludedCodes(r, disk); !reflect.DeepEqual(got, []string{string(lvmv2.ReasonForeignSignature)}) || !strings.Contains(r.Message, "LVMS wipes a device only once") {
		t.Errorf("second time: excluded %v, message %q", got, r.Message)
	}
}

// TestEngine_ForceWipeRefusals: a device the volume group names with forceWipeDevicesAndDestroyAllData is
// left alone, with a message saying why, whenever wiping it could hit data someone may want.
func TestEngine_ForceWipeRefusals(t *testing.T) {
	loopdev.RequireRoot(t)
	dir := loopdev.Dir(t)
	prefix := loopdev.Prefix(t)
	tests := []struct {
		name    string
		setup   func(t *testing.T, disk, id string, records *memWipes, in *Settings) (selectBy string)
		message []string
	}{
		{name: "named by its kernel name", message: []string{"/dev/disk/by-id/", "kernel name", "name it as /dev/disk/by-id/lvms-test-"},
			setup: func(t *testing.T, disk, id string, _ *memWipes, _ *Settings) string { return disk }},
		{name: "the wipe records cannot be read", message: []string{"wipe records cannot be read", "record unreadable"},
			setup: func(t *testing.T, disk, id string, records *memWipes, _ *Settings) string {
				records.broken = errors.New("record unreadable")
				return id
			}},
		{name: "a wipe began and was never confirmed", message: []string{"began wiping it", "never confirmed"},
			setup: func(t *testing.T, disk, id string, records *memWipes, _ *Settings) string {
				_ = records.Begin(context.Background(), prefix+"-vg", id, time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC))
				return id
			}},
		{name: "a physical volume of another volume group", message: []string{"physical volume of volume group " + prefix + "-other", "vgremove"},
			setup: func(t *testing.T, disk, id string, _ *memWipes, _ *Settings) string {
				loopdev.Run(t, "vgcreate", "-y", "--devices", disk, prefix+"-other", disk)
				t.Cleanup(func() { _, _ = exec.Command("vgremove", "-y", "--devices", disk, prefix+"-other").CombinedOutput() })
				return id
			}},
		{name: "used by a PersistentVolume", message: []string{"PersistentVolume local-pv-1 uses it"},
			setup: func(t *testing.T, disk, id string, _ *memWipes, s *Settings) string {
				s.PersistentVolumePaths = map[string]string{id: "local-pv-1"}
				return id
			}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			disk := loopdev.Attach(t, dir, diskSize, false)
			id := loopdev.ByIDLink(t, disk)
			loopdev.Run(t, "mkfs.ext4", "-q", disk)
			records := &memWipes{}
			ag := newAgent(t, prefix, "node", records)
			by := tc.setup(t, disk, id, records, &ag.s)
			out, _ := ag.converge(t, node(desired.VolumeGroup{Name: prefix + "-vg", Selector: pathSelector(t, by), ForceWipe: true}))
			r := out.VolumeGroups[0]
			if n := ag.log.count("wipefs --all"); n != 0 {
				t.Errorf("wiped: %v", ag.log.ran)
			}
			for _, m := range tc.message {
				if !strings.Contains(r.Message, m) {
					t.Errorf("message %q does not say %q", r.Message, m)
				}
			}
			if got := loopdev.Run(t, "blkid", "-o", "value", "-s", "TYPE", disk); !strings.Contains(got, "ext4") && tc.name != "a physical volume of another volume group" {
				t.Errorf("%s lost its file system: %q", disk, got)
			}
		})
	}
}

// TestEngine_ForceWipeRefusesMountedPartition: a disk whose partition is mounted is excluded only as "has
// children", which a forced wipe resolves for partitions nobody uses; the mounted one must stop it. This
// check alone stands between the mounted file system and wipefs --all --force.
func TestEngine_ForceWipeRefusesMountedPartition(t *testing.T) {
	loopdev.RequireRoot(t)
	dir := loopdev.Dir(t)
	disk, part := loopdev.AttachPartitioned(t, dir, diskSize)
	id := loopdev.ByIDLink(t, disk)
	loopdev.Run(t, "mkfs.ext4", "-q", part)
	mnt := filepath.Join(dir, "mnt")
	if err := os.Mkdir(mnt, 0o755); err != nil {
		t.Fatal(err)
	}
	loopdev.Run(t, "mount", part, mnt)
	t.Cleanup(func() { loopdev.Run(t, "umount", mnt) })
	if err := os.WriteFile(filepath.Join(mnt, "data"), []byte("the user's data"), 0o644); err != nil {
		t.Fatal(err)
	}

	prefix := loopdev.Prefix(t)
	ag := newAgent(t, prefix, "node", &memWipes{})
	out, _ := ag.converge(t, node(desired.VolumeGroup{Name: prefix + "-vg", Selector: pathSelector(t, id), ForceWipe: true}))
	r := out.VolumeGroups[0]
	if n := ag.log.count("wipefs --all"); n != 0 {
		t.Fatalf("wiped a disk whose partition is mounted: %v", ag.log.ran)
	}
	if want := part + " is mounted at " + mnt; !strings.Contains(r.Message, want) {
		t.Errorf("message %q does not say %q", r.Message, want)
	}
	if got := excludedCodes(r, disk); !reflect.DeepEqual(got, []string{string(lvmv2.ReasonHasChildren)}) {
		t.Errorf("disk excluded as %v, want only %s (the case a forced wipe may resolve)", got, lvmv2.ReasonHasChildren)
	}
	if b, err := os.ReadFile(filepath.Join(mnt, "data")); err != nil || string(b) != "the user's data" {
		t.Errorf("data on the mounted partition: %q, %v", b, err)
	}
}

func TestEngine_InterruptedBetweenPVCreateAndVGCreate(t *testing.T) {
	loopdev.RequireRoot(t)
	dir := loopdev.Dir(t)
	a, b := loopdev.Attach(t, dir, diskSize, false), loopdev.Attach(t, dir, diskSize, false)
	prefix := loopdev.Prefix(t)
	vgName := prefix + "-vg"
	ag := newAgent(t, prefix, "node", nil)
	want := node(desired.VolumeGroup{Name: vgName, Selector: knameSelector(t, a, b)})

	ag.log.fail = map[string]bool{"vgcreate": true} // the agent dies right after pvcreate
	out, obs := ag.converge(t, want)
	if out.VolumeGroups[0].Phase != PhaseFailed {
		t.Fatalf("interrupted pass: phase %s", out.VolumeGroups[0].Phase)
	}
	for _, dev := range []string{a, b} {
		if pv, ok := obs.Report.PV(dev); !ok || pv.VGName != "" {
			t.Fatalf("after the interruption %s should be an orphan PV: %+v %v", dev, pv, ok)
		}
	}

	ag.log.fail = nil
	out, obs = ag.converge(t, want)
	if out.VolumeGroups[0].Phase != PhaseHealthy || !reflect.DeepEqual(pvNames(obs.Report, vgName), sortedDevs(a, b)) {
		t.Fatalf("next pass: phase %s (%s), PVs %v", out.VolumeGroups[0].Phase, out.VolumeGroups[0].Message, pvNames(obs.Report, vgName))
	}
}

func TestEngine_RemoveEmptyDeviceAndDelete(t *testing.T) {
	loopdev.RequireRoot(t)
	dir := loopdev.Dir(t)
	a, b := loopdev.Attach(t, dir, diskSize, false), loopdev.Attach(t, dir, diskSize, false)
	prefix := loopdev.Prefix(t)
	vgName := prefix + "-vg"
	ag := newAgent(t, prefix, "node", nil)
	ag.converge(t, node(desired.VolumeGroup{Name: vgName, Selector: knameSelector(t, a, b)}))

	out, obs := ag.converge(t, node(desired.VolumeGroup{Name: vgName, Selector: knameSelector(t, a)}))
	if got := pvNames(obs.Report, vgName); !reflect.DeepEqual(got, []string{a}) || out.VolumeGroups[0].Phase != PhaseHealthy {
		t.Fatalf("after dropping %s: PVs %v, phase %s (%s)", b, got, out.VolumeGroups[0].Phase, out.VolumeGroups[0].Message)
	}
	if _, ok := obs.Report.PV(b); ok || inventoryHas(obs.Inventory, b, blockdev.SigLVM2) {
		t.Errorf("%s still carries an LVM label", b)
	}

	out, obs = ag.converge(t, node(desired.VolumeGroup{Name: vgName, Selector: knameSelector(t, a), Deleting: true}))
	if out.VolumeGroups[0].Phase != PhaseDeleted {
		t.Fatalf("deletion: phase %s (%s)", out.VolumeGroups[0].Phase, out.VolumeGroups[0].Message)
	}
	if _, ok := obs.Report.VG(vgName); ok || len(obs.Report.PVs) != 0 {
		t.Errorf("after deletion LVM still reports %v / %v", obs.Report.VGs, obs.Report.PVs)
	}
}

func TestEngine_UntaggedVolumeGroupIsNotTouched(t *testing.T) {
	loopdev.RequireRoot(t)
	dir := loopdev.Dir(t)
	a, b := loopdev.Attach(t, dir, diskSize, false), loopdev.Attach(t, dir, diskSize, false)
	prefix := loopdev.Prefix(t)
	vgName := prefix + "-vg"
	ag := newAgent(t, prefix, "node", nil)
	if err := ag.runner.VGCreate(context.Background(), vgName, nil, []string{a}); err != nil {
		t.Fatal(err)
	}
	ag.log.reset()
	out, obs := ag.converge(t, node(desired.VolumeGroup{Name: vgName, Selector: knameSelector(t, a, b), Deleting: false}))
	r := out.VolumeGroups[0]
	if r.Phase != PhaseFailed || !strings.Contains(r.Message, "LVMS did not create it") {
		t.Errorf("phase %s, message %q", r.Phase, r.Message)
	}
	if got := pvNames(obs.Report, vgName); !reflect.DeepEqual(got, []string{a}) || ag.log.count("vgextend") != 0 || ag.log.count("pvcreate") != 0 {
		t.Errorf("the untagged volume group was changed: PVs %v, commands %v", got, ag.log.ran)
	}
	out, _ = ag.converge(t, node(desired.VolumeGroup{Name: vgName, Selector: knameSelector(t, a), Deleting: true}))
	if ag.log.count("vgremove") != 0 {
		t.Errorf("deleting removed a volume group LVMS did not create: %v", ag.log.ran)
	}
}

func TestEngine_ThinPoolWithoutDeviceMapper(t *testing.T) {
	loopdev.RequireRoot(t)
	dir := loopdev.Dir(t)
	a := loopdev.Attach(t, dir, diskSize, false)
	prefix := loopdev.Prefix(t)
	ag := newAgent(t, prefix, "node", nil)
	ag.s.Capabilities = ag.runner.DetectCapabilities(context.Background(), lvm.TargetThinPool)
	if ag.s.Capabilities.Has(lvm.TargetThinPool) {
		t.Skip("this kernel has device-mapper thin pools; the VM lane covers pools, this test covers their absence")
	}
	out, obs := ag.converge(t, node(desired.VolumeGroup{Name: prefix + "-vg", Selector: knameSelector(t, a),
		ThinPools: []desired.ThinPool{{Name: "pool", SizePercent: 90, OverprovisionRatio: 10}}}))
	r := out.VolumeGroups[0]
	if _, ok := obs.Report.VG(prefix + "-vg"); !ok {
		t.Fatal("the volume group must be created even without device-mapper")
	}
	if r.Phase != PhaseDegraded || len(r.Pools) != 1 || !strings.Contains(r.Pools[0].Problem, "device-mapper is not available") {
		t.Errorf("phase %s, pools %+v", r.Phase, r.Pools)
	}
	if ag.log.count("lvcreate") != 0 {
		t.Errorf("ran lvcreate without device-mapper: %v", ag.log.ran)
	}
}

// TestEngine_AvailableMeansNobodyUsesIt: a blank device that another program holds open exclusively (as a
// VM's raw disk or a running mkfs would), or that a PersistentVolume names, is not taken.
func TestEngine_AvailableMeansNobodyUsesIt(t *testing.T) {
	loopdev.RequireRoot(t)
	dir := loopdev.Dir(t)
	prefix := loopdev.Prefix(t)
	held, named, free := loopdev.Attach(t, dir, diskSize, false), loopdev.Attach(t, dir, diskSize, false), loopdev.Attach(t, dir, diskSize, false)
	f, err := os.OpenFile(held, os.O_RDONLY|syscall.O_EXCL, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	ag := newAgent(t, prefix, "node", nil)
	ag.s.PersistentVolumePaths = map[string]string{loopdev.ByIDLink(t, named): "local-pv-7"}
	vg := prefix + "-vg"
	out, obs := ag.converge(t, node(desired.VolumeGroup{Name: vg, Selector: knameSelector(t, held, named, free)}))
	r := out.VolumeGroups[0]
	if got := pvNames(obs.Report, vg); !reflect.DeepEqual(got, []string{free}) {
		t.Errorf("PVs %v, want only the unused %s (phase %s: %s)", got, free, r.Phase, r.Message)
	}
	if got := excludedCodes(r, held); !reflect.DeepEqual(got, []string{string(lvmv2.ReasonInUse)}) {
		t.Errorf("held device: %v, want InUse", got)
	}
	if got := excludedCodes(r, named); !reflect.DeepEqual(got, []string{string(lvmv2.ReasonPersistentVolume)}) {
		t.Errorf("device of a PersistentVolume: %v, want PersistentVolume", got)
	}
}

// TestEngine_ForceWipeOnlyWhatIsAskedAndNamed: without forceWipeDevicesAndDestroyAllData nothing is wiped,
// even with wipe records at hand; with it, only the devices the selector names are, not one it picks by a
// property (size), and a named device refused for a reason does not stop the others.
func TestEngine_ForceWipeOnlyWhatIsAskedAndNamed(t *testing.T) {
	loopdev.RequireRoot(t)
	dir := loopdev.Dir(t)
	const oddSize = 201 << 20 // no other device of the host has exactly this size
	matched := loopdev.Attach(t, dir, oddSize, false)
	refused := loopdev.Attach(t, dir, diskSize, false)
	named := loopdev.Attach(t, dir, diskSize, false)
	for _, d := range []string{matched, refused, named} {
		loopdev.Run(t, "mkfs.ext4", "-q", d)
	}
	refusedID, namedID := loopdev.ByIDLink(t, refused), loopdev.ByIDLink(t, named)
	sel, err := selector.FromV2(lvmv2.DeviceSelector{DeviceSelectorTerms: []lvmv2.DeviceSelectorTerm{
		{MatchExpressions: []lvmv2.DeviceSelectorRequirement{{Key: lvmv2.KeyPath, Operator: lvmv2.OpIn, Values: []string{refusedID, namedID}}}},
		{MatchExpressions: []lvmv2.DeviceSelectorRequirement{
			{Key: lvmv2.KeyType, Operator: lvmv2.OpIn, Values: []string{"loop"}},
			{Key: lvmv2.KeySize, Operator: lvmv2.OpGt, Values: []string{fmt.Sprint(oddSize - 1)}},
			{Key: lvmv2.KeySize, Operator: lvmv2.OpLt, Values: []string{fmt.Sprint(oddSize + 1)}}}},
	}})
	if err != nil {
		t.Fatal(err)
	}
	prefix := loopdev.Prefix(t)
	records := &memWipes{}
	ag := newAgent(t, prefix, "node", records)
	ag.s.PersistentVolumePaths = map[string]string{refusedID: "local-pv-1"}
	vg := desired.VolumeGroup{Name: prefix + "-vg", Selector: sel}

	out, _ := ag.converge(t, node(vg))
	if n := ag.log.count("wipefs --all"); n != 0 {
		t.Fatalf("wiped without forceWipeDevicesAndDestroyAllData: %v", ag.log.ran)
	}
	if got := excludedCodes(out.VolumeGroups[0], named); !reflect.DeepEqual(got, []string{string(lvmv2.ReasonForeignSignature)}) {
		t.Errorf("%s excluded with %v, want ForeignSignature", named, got)
	}

	vg.ForceWipe = true
	out, _ = ag.converge(t, node(vg))
	r := out.VolumeGroups[0]
	if ag.log.count("wipefs --all --force "+named) != 1 || ag.log.count("wipefs --all --force "+matched) != 0 || ag.log.count("wipefs --all --force "+refused) != 0 {
		t.Errorf("wipes %v: want %s (named) only, not %s (picked by size) nor %s (a PersistentVolume's)", ag.log.ran, named, matched, refused)
	}
	for _, d := range []string{matched, refused} {
		if got := loopdev.Run(t, "blkid", "-o", "value", "-s", "TYPE", d); !strings.Contains(got, "ext4") {
			t.Errorf("%s lost its file system: %q", d, got)
		}
	}
	if strings.Contains(r.Message, matched+" is not wiped") {
		t.Errorf("message %q considers wiping %s, which the selector does not name", r.Message, matched)
	}
	if !strings.Contains(r.Message, refused+" is not wiped") {
		t.Errorf("message %q does not say why %s is not wiped", r.Message, refused)
	}
}
