package lockspace

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/lvms-dev/lvms/nodeagent/blockdev"
	"github.com/lvms-dev/lvms/nodeagent/lvm"
)

// host plays lvm2 and lvmlockctl on one node: each command line is answered by the first rule whose
// words it contains (stdout, or a failure with stderr); every command run is kept.
type host struct {
	rules []rule
	ran   []string
}

type rule struct {
	words  string // all of these, space-separated, in the command line
	stdout string
	code   int
	stderr string
}

func (h *host) lvm(hostID int, devicesFile string) LVM {
	return LVM{HostID: hostID, Runner: lvm.Runner{DevicesFile: devicesFile, Exec: execFunc(func(cmd lvm.Command) (lvm.Result, error) {
		line := strings.Join(cmd.Argv, " ")
		h.ran = append(h.ran, line)
		for _, r := range h.rules {
			if containsAll(cmd.Argv, strings.Fields(r.words)) {
				return lvm.Result{Stdout: []byte(r.stdout), ExitCode: r.code, Stderr: []byte(r.stderr)}, nil
			}
		}
		return lvm.Result{ExitCode: 3, Stderr: []byte("unexpected command " + line)}, nil
	})}}
}

func containsAll(argv, words []string) bool {
	for _, w := range words {
		if !slices.Contains(argv, w) {
			return false
		}
	}
	return true
}

// ranWith reports whether a command with all these words ran.
func (h *host) ranWith(words ...string) bool {
	return slices.ContainsFunc(h.ran, func(l string) bool { return containsAll(strings.Fields(l), words) })
}

// TestCreate: vgcreate --shared with LVMS's tag and a metadata area big enough for many LVs, as the node's
// host ID, on blank devices only; a device that is not blank stops it before lvm2 runs.
func TestCreate(t *testing.T) {
	h := &host{rules: []rule{{words: "vgcreate"}}}
	l := h.lvm(3, "lvms.devices")
	blank := []*blockdev.Device{{KName: "/dev/sdb"}, {KName: "/dev/sdc"}}
	if err := l.Create(t.Context(), "vgshared", blank, 0); err != nil {
		t.Fatal(err)
	}
	want := "lvm vgcreate --devicesfile lvms.devices --config global{use_lvmlockd=1} local{host_id=3} --shared --addtag " +
		lvm.OwnerTag + " --metadatasize 67108864b vgshared /dev/sdb /dev/sdc"
	if len(h.ran) != 1 || h.ran[0] != want {
		t.Errorf("ran %q, want %q", h.ran, want)
	}
	h.ran = nil
	if err := l.Create(t.Context(), "vgshared", blank, 1<<20); err != nil || !h.ranWith("--metadatasize", "1048576b") {
		t.Errorf("a metadata size asked for: %v, ran %q", err, h.ran)
	}

	h.ran = nil
	err := l.Create(t.Context(), "vgshared", []*blockdev.Device{{KName: "/dev/sdb"}, {KName: "/dev/sdc", FSType: "xfs"}}, 0)
	var be *BlankError
	if !errors.As(err, &be) || be.Device != "/dev/sdc" || !strings.Contains(err.Error(), "vgshared") || len(h.ran) != 0 {
		t.Errorf("a device with a filesystem: %v after %q, want a BlankError for /dev/sdc and no command", err, h.ran)
	}
	if err := l.Create(t.Context(), "vgshared", nil, 0); err == nil || len(h.ran) != 0 {
		t.Errorf("no device: %v after %q", err, h.ran)
	}

	h.rules = []rule{{words: "vgcreate", code: 5, stderr: "Global lock failed"}}
	if err := l.Create(t.Context(), "vgshared", blank, 0); err == nil || !strings.Contains(err.Error(), "Global lock failed") || !strings.Contains(err.Error(), "vgshared") {
		t.Errorf("vgcreate failing: %v", err)
	}
	if err := h.lvm(0, "").Create(t.Context(), "vgshared", blank, 0); err == nil {
		t.Error("created without a host ID")
	}
}

// TestStartStop: the lockspace is joined and left with the node's host ID; lvm2's failure names the volume
// group and what was being done.
func TestStartStop(t *testing.T) {
	h := &host{rules: []rule{{words: "--lockstart vg1"}, {words: "--lockstop vg1"}, {words: "vg2", code: 5, stderr: "Lockspace not found"}}}
	l := h.lvm(9, "")
	if err := l.Start(t.Context(), "vg1"); err != nil || !h.ranWith("vgchange", "--lockstart", "local{host_id=9}", "vg1") {
		t.Errorf("start: %v, ran %q", err, h.ran)
	}
	if err := l.Stop(t.Context(), "vg1"); err != nil || !h.ranWith("vgchange", "--lockstop", "vg1") {
		t.Errorf("stop: %v, ran %q", err, h.ran)
	}
	if err := l.Start(t.Context(), "vg2"); err == nil || !strings.Contains(err.Error(), "join the lockspace of shared volume group vg2") {
		t.Errorf("start failing: %v", err)
	}
	if err := l.Stop(t.Context(), "vg2"); err == nil || !strings.Contains(err.Error(), "leave the lockspace of shared volume group vg2") {
		t.Errorf("stop failing: %v", err)
	}
}

// TestAddDevice: a LUN another node created the volume group on goes into this node's devices file; a LUN
// already there is fine; without a devices file nothing runs (lvm2 sees every device).
func TestAddDevice(t *testing.T) {
	h := &host{rules: []rule{{words: "--adddev /dev/sdb"}, {words: "--adddev /dev/sdc", code: 5, stderr: "Device /dev/sdc already in devices file"},
		{words: "--adddev /dev/sdd", code: 5, stderr: "Cannot open devices file"}}}
	r := h.lvm(1, "lvms.devices").Runner
	if err := AddDevice(t.Context(), r, "/dev/sdb"); err != nil || !h.ranWith("lvmdevices", "--devicesfile", "lvms.devices", "--adddev", "/dev/sdb") {
		t.Errorf("add: %v, ran %q", err, h.ran)
	}
	if err := AddDevice(t.Context(), r, "/dev/sdc"); err != nil {
		t.Errorf("already in the devices file: %v", err)
	}
	if err := AddDevice(t.Context(), r, "/dev/sdd"); err == nil || !strings.Contains(err.Error(), "Cannot open devices file") || !strings.Contains(err.Error(), "lvms.devices") {
		t.Errorf("lvmdevices failing: %v", err)
	}
	h.ran = nil
	if err := AddDevice(t.Context(), h.lvm(1, "").Runner, "/dev/sdb"); err != nil || len(h.ran) != 0 {
		t.Errorf("no devices file: %v, ran %q", err, h.ran)
	}
}

// TestExists: the volume group is seen, not seen (lvm2's "not found"), or the question failed.
func TestExists(t *testing.T) {
	h := &host{rules: []rule{{words: "vgs vg1", stdout: "  vg1\n"}, {words: "vgs vg2", code: 5, stderr: `Volume group "vg2" not found`},
		{words: "vgs vg3", code: 5, stderr: "Cannot access VG vg3 due to failed lock."}, {words: "vgs vg4", stdout: "\n"}}}
	l := h.lvm(1, "")
	for vg, want := range map[string]bool{"vg1": true, "vg2": false, "vg4": false} {
		if got, err := l.Exists(t.Context(), vg); err != nil || got != want {
			t.Errorf("%s: %v, %v; want %v", vg, got, err, want)
		}
	}
	if got, err := l.Exists(t.Context(), "vg3"); err == nil || got || !strings.Contains(err.Error(), "failed lock") {
		t.Errorf("vgs failing: %v, %v; want an error, not a missing volume group", got, err)
	}
}

// TestSpace reads the volume group's size and free bytes; vgs failing is an error naming the volume group.
func TestSpace(t *testing.T) {
	h := &host{rules: []rule{{words: "vg_size,vg_free vg1", stdout: "  1069547520 1002438656\n"}, {words: "vg2", code: 5, stderr: "failed"}}}
	l := h.lvm(1, "")
	if size, free, err := l.Space(t.Context(), "vg1"); err != nil || size != 1069547520 || free != 1002438656 {
		t.Errorf("got %d, %d, %v", size, free, err)
	}
	if _, _, err := l.Space(t.Context(), "vg2"); err == nil || !strings.Contains(err.Error(), "vg2") {
		t.Errorf("vgs failing: %v", err)
	}
}

// TestGlobalLock: where the global lock is, from lvmlockctl --info; lvmlockctl failing is an error.
func TestGlobalLock(t *testing.T) {
	h := &host{rules: []rule{{words: "--info", stdout: "VG vg1 lock_type=sanlock abc\nLS sanlock lvm_vg1\nLK GL un ver 0\n"}}}
	if got, err := h.lvm(1, "").GlobalLock(t.Context()); err != nil || got != "vg1" {
		t.Errorf("got %q, %v", got, err)
	}
	h.rules = []rule{{words: "--info", code: 1, stderr: "lvmlockd not running"}}
	if got, err := h.lvm(1, "").GlobalLock(t.Context()); err == nil || got != "" {
		t.Errorf("lvmlockctl failing: %q, %v", got, err)
	}
	if got, err := h.lvm(1, "").Started(t.Context()); err == nil || got != nil {
		t.Errorf("lvmlockctl failing: Started = %q, %v", got, err)
	}
}

// TestMoveGlobalLock: disabled in one lockspace, then enabled in the other; when enabling fails it is
// enabled again where it was, and when that fails too the error says what to run by hand.
func TestMoveGlobalLock(t *testing.T) {
	h := &host{rules: []rule{{words: "--gl-disable a"}, {words: "--gl-enable b"}}}
	l := h.lvm(1, "")
	if err := l.MoveGlobalLock(t.Context(), "a", "b"); err != nil {
		t.Fatal(err)
	}
	if want := []string{"lvmlockctl --gl-disable a", "lvmlockctl --gl-enable b"}; !slices.Equal(h.ran, want) {
		t.Errorf("ran %q, want %q", h.ran, want)
	}

	h = &host{rules: []rule{{words: "--gl-disable a", code: 1, stderr: "no such lockspace"}}}
	if err := h.lvm(1, "").MoveGlobalLock(t.Context(), "a", "b"); err == nil || len(h.ran) != 1 {
		t.Errorf("disabling failing: %v after %q, want an error and nothing enabled", err, h.ran)
	}

	h = &host{rules: []rule{{words: "--gl-disable a"}, {words: "--gl-enable b", code: 1, stderr: "b not started"}, {words: "--gl-enable a"}}}
	err := h.lvm(1, "").MoveGlobalLock(t.Context(), "a", "b")
	if err == nil || !strings.Contains(err.Error(), "it stays in a") || !h.ranWith("--gl-enable", "a") {
		t.Errorf("enabling failing: %v after %q, want it enabled again in a", err, h.ran)
	}

	h = &host{rules: []rule{{words: "--gl-disable a"}, {words: "--gl-enable", code: 1, stderr: "lvmlockd gone"}}}
	err = h.lvm(1, "").MoveGlobalLock(t.Context(), "a", "b")
	if err == nil || !strings.Contains(err.Error(), "run lvmlockctl --gl-enable a") {
		t.Errorf("both enables failing: %v, want the command to run by hand", err)
	}
}

// TestLVCommands: each LV operation runs as the node's host ID on vg/lv, and another node's lock makes a
// LockedError.
func TestLVCommands(t *testing.T) {
	h := &host{rules: []rule{{words: "vg/locked", code: 5, stderr: "LV locked by other host: vg/locked"},
		{words: "vg/held", code: 5, stderr: "lock is held by another host"},
		{words: "vg/broken", code: 5, stderr: "Internal error"},
		{words: "lvcreate locked", code: 5, stderr: "LV locked by other host"}, // the volume group's lock
		{words: "lvcreate held", code: 5, stderr: "lock is held by another host"},
		{words: "lvcreate broken", code: 5, stderr: "Internal error"},
		{words: "lvcreate"}, {words: "lvchange"}, {words: "lvremove"}, {words: "lvextend"}}}
	l := h.lvm(4, "")
	ctx := t.Context()
	if err := l.CreateLV(ctx, "vg", "lv1", 1<<30, "tag1", "tag2"); err != nil ||
		!h.ranWith("lvcreate", "local{host_id=4}", "--activate", "n", "--type", "linear", "-L", "1073741824b", "-n", "lv1", "--addtag", "tag1", "tag2", "vg") {
		t.Errorf("create: %v, ran %q", err, h.ran)
	}
	if err := l.Activate(ctx, "vg", "lv1", Exclusive); err != nil || !h.ranWith("lvchange", "-aey", "vg/lv1") {
		t.Errorf("activate exclusive: %v, ran %q", err, h.ran)
	}
	if err := l.Activate(ctx, "vg", "lv1", Shared); err != nil || !h.ranWith("lvchange", "-asy", "vg/lv1") {
		t.Errorf("activate shared: %v, ran %q", err, h.ran)
	}
	h.ran = nil
	if err := l.Activate(ctx, "vg", "lv1", "y"); err == nil || len(h.ran) != 0 {
		t.Errorf("an unknown activation: %v, ran %q", err, h.ran)
	}
	if err := l.Deactivate(ctx, "vg", "lv1"); err != nil || !h.ranWith("lvchange", "-an", "vg/lv1") {
		t.Errorf("deactivate: %v, ran %q", err, h.ran)
	}
	if err := l.RemoveLV(ctx, "vg", "lv1"); err != nil || !h.ranWith("lvremove", "-y", "vg/lv1") {
		t.Errorf("remove: %v, ran %q", err, h.ran)
	}
	if err := l.ExtendLV(ctx, "vg", "lv1", 2<<30); err != nil || !h.ranWith("lvextend", "-L", "2147483648b", "vg/lv1") {
		t.Errorf("extend: %v, ran %q", err, h.ran)
	}

	var le *LockedError
	for name, op := range map[string]func(lv string) error{
		"activate":   func(lv string) error { return l.Activate(ctx, "vg", lv, Exclusive) },
		"deactivate": func(lv string) error { return l.Deactivate(ctx, "vg", lv) },
		"remove":     func(lv string) error { return l.RemoveLV(ctx, "vg", lv) },
		"extend":     func(lv string) error { return l.ExtendLV(ctx, "vg", lv, 1<<30) },
		"create":     func(lv string) error { return l.CreateLV(ctx, "vg", lv, 1<<30) },
	} {
		for _, lv := range []string{"locked", "held"} {
			if err := op(lv); !errors.As(err, &le) || le.LV != lv {
				t.Errorf("%s %s: %v, want a LockedError", name, lv, err)
			}
		}
		if err := op("broken"); err == nil || errors.As(err, &le) || !strings.Contains(err.Error(), "Internal error") {
			t.Errorf("%s failing otherwise: %v, want lvm2's error", name, err)
		}
	}
}

// TestLookup: an LV of the volume group with this node's activation, ErrNoLV for one that does not exist,
// lvs failing is an error.
func TestLookup(t *testing.T) {
	h := &host{rules: []rule{{words: "lvs vg", stdout: `{"report":[{"lv":[{"lv_name":"a","lv_size":"1048576","lv_active_locally":"1","lv_active_exclusively":"0"}]}]}`},
		{words: "lvs bad", code: 5, stderr: "Volume group bad has no lockspace"}}}
	l := h.lvm(1, "")
	if lv, err := l.Lookup(t.Context(), "vg", "a"); err != nil || lv != (LV{Size: 1 << 20, Active: Shared}) {
		t.Errorf("got %+v, %v", lv, err)
	}
	if _, err := l.Lookup(t.Context(), "vg", "b"); !errors.Is(err, ErrNoLV) || !strings.Contains(err.Error(), "vg/b") {
		t.Errorf("a missing LV: %v", err)
	}
	if _, err := l.Lookup(t.Context(), "bad", "a"); err == nil || errors.Is(err, ErrNoLV) || !strings.Contains(err.Error(), "no lockspace") {
		t.Errorf("lvs failing: %v, want its error, not ErrNoLV", err)
	}
	if got := DevicePath("vg", "a"); got != "/dev/vg/a" {
		t.Errorf("DevicePath = %s", got)
	}
}

// TestStarted_JoinedAfterOneThatIsNot: every joined lockspace is listed, also one lvmlockctl prints after a
// lockspace that is still being added.
func TestStarted_JoinedAfterOneThatIsNot(t *testing.T) {
	h := &host{rules: []rule{
		{words: "--info", stdout: "VG adding lock_type=sanlock u1\nLS sanlock lvm_adding\n\nVG joined lock_type=sanlock u2\nLS sanlock lvm_joined\n\nVG dlm lock_type=dlm u3\nLS dlm lvm_dlm\n"},
		{words: "sanlock client status", stdout: "s lvm_adding:7:/dev/mapper/adding-lvmlock:0 ADD\ns lvm_joined:7:/dev/mapper/joined-lvmlock:0\n"},
	}}
	got, err := h.lvm(7, "").Started(t.Context())
	if err != nil || !slices.Equal(got, []string{"joined", "dlm"}) {
		t.Errorf("Started = %v, %v; want [joined dlm]", got, err)
	}
	if n := len(h.ran); n != 2 {
		t.Errorf("%d commands (%q); want lvmlockctl and sanlock once each", n, h.ran)
	}
}

// TestParseLVs_HiddenFirst: a hidden LV (lvmlock) listed before the volumes hides none of them.
func TestParseLVs_HiddenFirst(t *testing.T) {
	out := `{"report": [{"lv": [
		{"lv_name":"[lvmlock]", "lv_size":"268435456", "lv_active_locally":"1", "lv_active_exclusively":"1"},
		{"lv_name":"", "lv_size":"", "lv_active_locally":"", "lv_active_exclusively":""},
		{"lv_name":"a", "lv_size":"4096", "lv_active_locally":"0", "lv_active_exclusively":"0"}]}]}`
	lvs, err := parseLVs([]byte(out))
	if err != nil || len(lvs) != 1 || lvs["a"] != (LV{Size: 4096}) {
		t.Errorf("got %v, %v; want only a", lvs, err)
	}
}
