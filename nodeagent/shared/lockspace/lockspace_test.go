package lockspace

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/lvms-dev/lvms/nodeagent/blockdev"
	"github.com/lvms-dev/lvms/nodeagent/lvm"
)

// TestCheckBlank: only a device with nothing on it takes a shared volume group; every refusal names what
// was found and how to wipe it.
func TestCheckBlank(t *testing.T) {
	cases := []struct {
		name string
		dev  *blockdev.Device
		want string
	}{
		{"blank", &blockdev.Device{KName: "/dev/sdb"}, ""},
		{"filesystem", &blockdev.Device{KName: "/dev/sdb", FSType: "xfs"}, "signature xfs"},
		{"partition table", &blockdev.Device{KName: "/dev/sdb", PTType: "gpt", Signatures: []string{"gpt", "PMBR"}}, "signature gpt"},
		{"another host's PV", &blockdev.Device{KName: "/dev/sdb", FSType: blockdev.SigLVM2}, "an LVM physical volume"},
		{"mounted", &blockdev.Device{KName: "/dev/sdb", MountPoints: []string{"/mnt"}}, "mounted at /mnt"},
		{"partitions", &blockdev.Device{KName: "/dev/sdb", Children: []string{"/dev/sdb1"}}, "partitions or holders"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := CheckBlank(tc.dev)
			if tc.want == "" {
				if err != nil {
					t.Fatalf("a blank device refused: %v", err)
				}
				return
			}
			var be *BlankError
			if !errors.As(err, &be) || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), "wipefs --all /dev/sdb") {
				t.Errorf("got %v, want a BlankError naming %q and the wipe command", err, tc.want)
			}
		})
	}
	if err := CheckBlank(nil); err == nil {
		t.Error("a device not found passes")
	}
}

// TestNoHostID: nothing touches a shared volume group before the node holds a host ID.
func TestNoHostID(t *testing.T) {
	if _, err := (LVM{}).cmd(t.Context(), "vgs"); err == nil || !strings.Contains(err.Error(), "claim one") {
		t.Errorf("a command without a host ID: %v", err)
	}
}

// TestParseInfo reads the lockspaces lvmlockd lists from lvmlockctl --info (the shape lvm2 2.03.16 prints,
// as the e2e/sharedvm test logs it).
func TestParseInfo(t *testing.T) {
	out := "VG vgshared lock_type=sanlock 1dUpGw-xyz\nLS sanlock lvm_vgshared\nLK VG un ver 1\nLK GL un ver 0\n" +
		"\nVG vg2 lock_type=dlm abc\nLS dlm lvm_vg2\n"
	want := []listedLockspace{{VG: "vgshared", Type: "sanlock", Name: "lvm_vgshared"}, {VG: "vg2", Type: "dlm", Name: "lvm_vg2"}}
	if got := parseInfo(out); !slices.Equal(got, want) {
		t.Errorf("parseInfo = %v, want %v", got, want)
	}
	if got := parseInfo(""); len(got) != 0 {
		t.Errorf("no lockspace: %v", got)
	}
}

// TestStarted: a lockspace counts as joined only once sanlock holds it. lvmlockd lists a sanlock lockspace
// while it is being added and for a while after its start failed (lvmlockd could not open the lvmlock LV,
// sanlock could not acquire the host ID); a node that took it for joined reported its volume group Ready
// and then failed every lock.
func TestStarted(t *testing.T) {
	info := "VG joined lock_type=sanlock u1\nLS sanlock lvm_joined\n\nVG adding lock_type=sanlock u2\nLS sanlock lvm_adding\n" +
		"\nVG failed lock_type=sanlock u3\nLS sanlock lvm_failed\n\nVG leaving lock_type=sanlock u4\nLS sanlock lvm_leaving\n"
	sanlock := "daemon 1f2e\np -1 helper\np -1 listener\np 212 lvmlockd\np -1 status\n" +
		"s lvm_joined:7:/dev/mapper/joined-lvmlock:0\n" +
		"s lvm_adding:7:/dev/mapper/adding-lvmlock:0 ADD\n" +
		"s lvm_leaving:7:/dev/mapper/leaving-lvmlock:0 REM\n" +
		"r lvm_joined:GLLK:/dev/mapper/joined-lvmlock:69206016:5 p 212\n"
	var ran []string
	exec := execFunc(func(cmd lvm.Command) (lvm.Result, error) {
		ran = append(ran, strings.Join(cmd.Argv, " "))
		switch {
		case slices.Contains(cmd.Argv, "--info"):
			return lvm.Result{Stdout: []byte(info)}, nil
		case slices.Contains(cmd.Argv, "sanlock"):
			return lvm.Result{Stdout: []byte(sanlock)}, nil
		}
		return lvm.Result{ExitCode: 1}, nil
	})
	l := LVM{Runner: lvm.Runner{Exec: exec}, HostID: 7}
	got, err := l.Started(t.Context())
	if err != nil || !slices.Equal(got, []string{"joined"}) {
		t.Errorf("Started = %v, %v; want only [joined] (adding, failed and leaving are not usable)", got, err)
	}

	// sanlock not answering is an error, not "nothing joined" and not "everything lvmlockd lists".
	l.Runner.Exec = execFunc(func(cmd lvm.Command) (lvm.Result, error) {
		if slices.Contains(cmd.Argv, "--info") {
			return lvm.Result{Stdout: []byte(info)}, nil
		}
		return lvm.Result{ExitCode: 1, Stderr: []byte("connect failed")}, nil
	})
	if got, err := l.Started(t.Context()); err == nil || !strings.Contains(err.Error(), "sanlock") {
		t.Errorf("sanlock down: Started = %v, %v; want an error naming sanlock", got, err)
	}

	// No sanlock lockspace listed: sanlock is not asked.
	ran = nil
	l.Runner.Exec = exec
	info = ""
	if got, err := l.Started(t.Context()); err != nil || len(got) != 0 || len(ran) != 1 {
		t.Errorf("nothing listed: Started = %v, %v after %q; want nothing, one command", got, err, ran)
	}
}

type execFunc func(cmd lvm.Command) (lvm.Result, error)

func (f execFunc) Execute(_ context.Context, cmd lvm.Command) (lvm.Result, error) { return f(cmd) }

// TestLockedError: lvm2's refusal because another node holds the LV's lock becomes a LockedError that says
// to release it there; other failures keep lvm2's message.
func TestLockedError(t *testing.T) {
	locked := &lvm.CommandError{Command: "lvchange -aey vg/lv", Code: 5, Stderr: "LV locked by other host: vg/lv"}
	err := wrap(locked, "activate (ey)", "vg", "lv")
	var le *LockedError
	if !errors.As(err, &le) || !strings.Contains(err.Error(), "unstage its volume") || strings.Count(err.Error(), "vg/lv") != 2 {
		t.Errorf("locked: %v", err)
	}
	other := &lvm.CommandError{Command: "lvremove -y vg/lv", Code: 5, Stderr: "Volume group \"vg\" not found"}
	if err := wrap(other, "remove", "vg", "lv"); errors.As(err, &le) || !strings.Contains(err.Error(), "remove vg/lv: ") {
		t.Errorf("other failure: %v", err)
	}
}

// TestParseSpace reads vgs' size and free space (--noheadings --units b --nosuffix).
func TestParseSpace(t *testing.T) {
	size, free, err := parseSpace("  1069547520 1002438656\n")
	if err != nil || size != 1069547520 || free != 1002438656 {
		t.Errorf("got %d, %d, %v", size, free, err)
	}
	for _, bad := range []string{"", "12", "a b", "1 2 3", "-1 5"} {
		if _, _, err := parseSpace(bad); err == nil || !strings.Contains(err.Error(), "vgs") {
			t.Errorf("%q: %v, want an error naming vgs", bad, err)
		}
	}
}

// TestParseLVs reads lvs' JSON report (--binary): this node's activation of each LV, hidden LVs left out.
func TestParseLVs(t *testing.T) {
	out := `{"report": [{"lv": [
		{"lv_name":"a", "lv_size":"67108864", "lv_active_locally":"1", "lv_active_exclusively":"1"},
		{"lv_name":"b", "lv_size":"67108864", "lv_active_locally":"1", "lv_active_exclusively":"0"},
		{"lv_name":"c", "lv_size":"134217728", "lv_active_locally":"0", "lv_active_exclusively":"0"},
		{"lv_name":"[lvmlock]", "lv_size":"268435456", "lv_active_locally":"1", "lv_active_exclusively":"1"}]}]}`
	lvs, err := parseLVs([]byte(out))
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]LV{"a": {67108864, Exclusive}, "b": {67108864, Shared}, "c": {134217728, ""}}
	if fmt.Sprint(lvs) != fmt.Sprint(want) {
		t.Errorf("got %v, want %v", lvs, want)
	}
	for _, bad := range []string{"", "{", `{"report":[{"lv":[{"lv_name":"a","lv_size":"big"}]}]}`} {
		if _, err := parseLVs([]byte(bad)); err == nil {
			t.Errorf("%q parsed", bad)
		}
	}
}

// TestParseGlobalLock finds the lockspace whose section of lvmlockctl --info lists the global lock.
func TestParseGlobalLock(t *testing.T) {
	out := "VG vg1 lock_type=sanlock abc\nLS sanlock lvm_vg1\nLK VG un ver 3\n" +
		"VG vgshared lock_type=sanlock 1dUpGw-xyz\nLS sanlock lvm_vgshared\nLK VG un ver 1\nLK GL un ver 0\n"
	if got := parseGlobalLock(out); got != "vgshared" {
		t.Errorf("got %q, want vgshared", got)
	}
	if got := parseGlobalLock("VG vg1 lock_type=sanlock abc\nLK VG un ver 3\n"); got != "" {
		t.Errorf("no global lock listed: got %q", got)
	}
	if got := parseGlobalLock("LK GL un ver 0\n"); got != "" {
		t.Errorf("a GL line outside any VG section: got %q", got)
	}
}
