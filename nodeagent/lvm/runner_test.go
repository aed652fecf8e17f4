package lvm

import (
	"context"
	"errors"
	"maps"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
)

// scripted answers commands by their full command line and records what ran.
type scripted struct {
	answers map[string]Result
	ran     []Command
}

func (s *scripted) Execute(_ context.Context, cmd Command) (Result, error) {
	s.ran = append(s.ran, cmd)
	if r, ok := s.answers[strings.Join(cmd.Argv, " ")]; ok {
		return r, nil
	}
	return Result{ExitCode: 127, Stderr: []byte("command not found")}, nil
}

func TestRunner_CommandLine(t *testing.T) {
	tests := []struct {
		name     string
		runner   Runner
		wantArgv string
		wantEnv  []string
	}{
		{
			name:     "direct, no devices file",
			runner:   Runner{},
			wantArgv: "lvm vgs --reportformat json",
			wantEnv:  []string{"LC_ALL=C", "LVM_SUPPRESS_FD_WARNINGS=1"},
		},
		{
			name:     "through nsenter with the agent's devices file and system dir",
			runner:   Runner{Prefix: NSEnterPrefix(), DevicesFile: "lvms-node-a.devices", Env: []string{"LVM_SYSTEM_DIR=/etc/lvm-a"}},
			wantArgv: "nsenter --target 1 --mount --uts --ipc --net --pid -- lvm vgs --devicesfile lvms-node-a.devices --reportformat json",
			wantEnv:  []string{"LC_ALL=C", "LVM_SUPPRESS_FD_WARNINGS=1", "LVM_SYSTEM_DIR=/etc/lvm-a"},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ex := &scripted{answers: map[string]Result{tc.wantArgv: {Stdout: []byte("ok")}}}
			tc.runner.Exec = ex
			out, err := tc.runner.LVMCmd(context.Background(), "vgs", "--reportformat", "json")
			if err != nil {
				t.Fatalf("err = %v; ran %v", err, ex.ran)
			}
			if string(out) != "ok" {
				t.Errorf("stdout = %q", out)
			}
			if !reflect.DeepEqual(ex.ran[0].Env, tc.wantEnv) {
				t.Errorf("env = %v, want %v", ex.ran[0].Env, tc.wantEnv)
			}
		})
	}
}

func TestRunner_DevicesFilePath(t *testing.T) {
	if got := (Runner{DevicesFile: "a.devices"}).DevicesFilePath(); got != "/etc/lvm/devices/a.devices" {
		t.Errorf("default = %s", got)
	}
	r := Runner{DevicesFile: "a.devices", Env: []string{"LVM_SYSTEM_DIR=/tmp/x"}}
	if got := r.DevicesFilePath(); got != filepath.Join("/tmp/x", "devices", "a.devices") {
		t.Errorf("with LVM_SYSTEM_DIR = %s", got)
	}
	if got := (Runner{}).DevicesFilePath(); got != "" {
		t.Errorf("without devices file = %q", got)
	}
}

func TestRunner_Errors(t *testing.T) {
	stderr := "  Volume group \"vg9\" not found\n  Cannot process volume group vg9\n"
	ex := &scripted{answers: map[string]Result{
		"lvm vgremove vg9":  {ExitCode: 5, Stderr: []byte(stderr)},
		"lvm vgremove busy": {ExitCode: 5, Stderr: []byte("  Logical volume vg/lv in use.\n")},
	}}
	r := Runner{Exec: ex}
	err := r.VGRemove(context.Background(), "vg9")
	ce, ok := AsCommandError(err)
	if !ok || ce.ExitCode() != 5 || !IsNotFound(err) {
		t.Fatalf("err = %v; want a not-found CommandError with exit code 5", err)
	}
	if want := `remove volume group vg9: lvm vgremove vg9: exit code 5: Volume group "vg9" not found; Cannot process volume group vg9`; err.Error() != want {
		t.Errorf("message:\n got %s\nwant %s", err, want)
	}
	if err := r.VGRemove(context.Background(), "busy"); err == nil || IsNotFound(err) {
		t.Errorf("busy VG: err = %v; want an error that is not not-found", err)
	}
	var ec interface{ ExitCode() int }
	if !errors.As(err, &ec) {
		t.Error("CommandError does not expose ExitCode() to other packages")
	}
}

func TestOSExecutor(t *testing.T) {
	res, err := OSExecutor{}.Execute(context.Background(), Command{Argv: []string{"sh", "-c", "echo out; echo err >&2; echo $FOO; exit 3"}, Env: []string{"FOO=bar"}})
	if err != nil {
		t.Fatal(err)
	}
	if string(res.Stdout) != "out\nbar\n" || string(res.Stderr) != "err\n" || res.ExitCode != 3 {
		t.Errorf("result = %+v", res)
	}
	if _, err := (OSExecutor{}).Execute(context.Background(), Command{Argv: []string{"/nonexistent/binary"}}); err == nil {
		t.Error("missing binary: no error")
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := (OSExecutor{}).Execute(ctx, Command{Argv: []string{"sleep", "10"}}); !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled context: err = %v", err)
	}
}

func TestCountingExecutor(t *testing.T) {
	c := &CountingExecutor{Next: &scripted{}}
	r := Runner{Exec: c}
	for range 3 {
		_, _ = r.Run(context.Background(), "true")
	}
	_, _ = r.Run(context.Background(), "nsenter", "--target", "1", "--mount", "--", "lsblk", "--json")
	if c.Count() != 4 {
		t.Errorf("count = %d, want 4", c.Count())
	}
	if got, want := c.Programs(), map[string]int{"true": 3, "lsblk": 1}; !maps.Equal(got, want) {
		t.Errorf("programs = %v, want %v", got, want)
	}
	if got := c.Args("lsblk"); len(got) != 1 || !slices.Equal(got[0], []string{"--json"}) {
		t.Errorf("lsblk's arguments = %q, want [[--json]]", got)
	}
	if got, args := program([]string{"/sbin/lvm", "fullreport", "--reportformat", "json"}); got != "lvm fullreport" || !slices.Equal(args, []string{"--reportformat", "json"}) {
		t.Errorf("program(lvm fullreport …) = %q %q", got, args)
	}
	c.Reset()
	if c.Count() != 0 || len(c.Programs()) != 0 || c.Args("true") != nil {
		t.Errorf("after Reset: count %d, programs %v", c.Count(), c.Programs())
	}
}

func TestDetectCapabilities(t *testing.T) {
	noDM := string(readFixture(t, "dmsetup-targets-no-dm.stderr"))
	thin := string(readFixture(t, "dmsetup-targets-thin.stdout"))
	tests := []struct {
		name        string
		answers     map[string]Result
		want        []string
		wantDM      bool
		wantMissing []string
		wantReason  string
		// wantMetadataOnly: lvm2 never activates, so linear and striped need no target.
		wantMetadataOnly bool
	}{
		{
			name:        "no device-mapper (this host's kernel)",
			answers:     map[string]Result{"dmsetup targets": {ExitCode: 1, Stderr: []byte(noDM)}},
			want:        []string{TargetThinPool},
			wantMissing: []string{TargetThinPool},
			wantReason:  "device-mapper is not available in this kernel (dmsetup targets: /dev/mapper/control: open failed: No such device)",
		},
		{
			// lvms local's simulated nodes: lvm.conf global/activation = 0 (lvmconfig's output recorded on
			// this host with such an lvm.conf); thick volumes are made in the metadata alone.
			name: "no device-mapper, activation off",
			answers: map[string]Result{"dmsetup targets": {ExitCode: 1, Stderr: []byte(noDM)},
				"lvmconfig global/activation": {Stdout: []byte("activation=0\n")}},
			want:             []string{TargetLinear, TargetStriped, TargetThinPool},
			wantMissing:      []string{TargetThinPool},
			wantMetadataOnly: true,
			wantReason:       "device-mapper is not available in this kernel (dmsetup targets: /dev/mapper/control: open failed: No such device)",
		},
		{
			name: "no device-mapper, activation not configured",
			answers: map[string]Result{"dmsetup targets": {ExitCode: 1, Stderr: []byte(noDM)},
				"lvmconfig global/activation": {ExitCode: 5, Stderr: []byte("  Configuration node global/activation not found\n")}},
			want:        []string{TargetLinear, TargetStriped},
			wantMissing: []string{TargetLinear, TargetStriped},
			wantReason:  "device-mapper is not available in this kernel (dmsetup targets: /dev/mapper/control: open failed: No such device)",
		},
		{
			name:    "thin targets loaded",
			answers: map[string]Result{"dmsetup targets": {Stdout: []byte(thin)}},
			want:    []string{TargetThinPool, TargetSnapshot},
			wantDM:  true,
		},
		{
			name: "raid module cannot be loaded",
			answers: map[string]Result{
				"dmsetup targets":  {Stdout: []byte(thin)},
				"modprobe dm-raid": {ExitCode: 1, Stderr: []byte("modprobe: FATAL: Module dm-raid not found")},
			},
			want:        []string{TargetThinPool, TargetRAID},
			wantDM:      true,
			wantMissing: []string{TargetRAID},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			caps := Runner{Exec: &scripted{answers: tc.answers}}.DetectCapabilities(context.Background(), tc.want...)
			if caps.DeviceMapper != tc.wantDM || caps.Reason != tc.wantReason || caps.MetadataOnly != tc.wantMetadataOnly {
				t.Errorf("caps = %+v", caps)
			}
			if got := caps.Missing(tc.want...); !reflect.DeepEqual(got, tc.wantMissing) {
				t.Errorf("missing = %v, want %v", got, tc.wantMissing)
			}
		})
	}
}

func TestReplay(t *testing.T) {
	session := func() *Session {
		return &Session{Source: "test", Commands: []Recording{
			{Argv: []string{"lvm", "vgs"}, Stdout: "first"},
			{Argv: []string{"lvm", "lvcreate"}, ExitCode: 5, Stderr: "no space"},
			{Argv: []string{"lvm", "vgs"}, Stdout: "second"},
			{Argv: []string{"lvm", "lvremove", "-y", "vg/lv"}},
		}}
	}
	ctx := context.Background()
	vgs := func(r Runner) string {
		out, err := r.Run(ctx, "lvm", "vgs")
		if err != nil {
			return "error: " + err.Error()
		}
		return string(out)
	}
	t.Run("each recording answers once, in order", func(t *testing.T) {
		rp := NewReplay("session.json", session())
		rp.PrefixLen = 2
		r := Runner{Prefix: []string{"nsenter", "--"}, Exec: rp}
		if got := []string{vgs(r), vgs(r)}; !reflect.DeepEqual(got, []string{"first", "second"}) {
			t.Errorf("replayed %v, want first, second", got)
		}
		if _, err := r.Run(ctx, "lvm", "lvcreate"); err == nil || !strings.Contains(err.Error(), "no space") {
			t.Errorf("recorded failure: %v", err)
		}
		if _, err := r.Run(ctx, "lvm", "lvremove", "-y", "vg/lv"); err != nil {
			t.Error(err)
		}
		if err := rp.Check(); err != nil {
			t.Errorf("every recording used once: %v", err)
		}
	})
	t.Run("a command never recorded", func(t *testing.T) {
		rp := NewReplay("session.json", session())
		rp.AllowUnused = "this test runs one command"
		_, err := Runner{Exec: rp}.Run(ctx, "lvm", "pvs")
		const want = "replaying recorded lvm2 output from session.json (test): `lvm pvs` was never recorded"
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("unrecorded command: %v", err)
		}
		if err := rp.Check(); err == nil || !strings.Contains(err.Error(), "`lvm pvs` was never recorded") {
			t.Errorf("Check = %v, want the unrecorded command even when the code swallowed its error", err)
		}
	})
	t.Run("a destructive command run once more than recorded", func(t *testing.T) {
		rp := NewReplay("session.json", session())
		rp.AllowUnused = "this test only removes"
		r := Runner{Exec: rp}
		_, _ = r.Run(ctx, "lvm", "lvremove", "-y", "vg/lv")
		if _, err := r.Run(ctx, "lvm", "lvremove", "-y", "vg/lv"); err == nil {
			t.Error("a second lvremove replayed the recorded success")
		}
		if err := rp.Check(); err == nil || !strings.Contains(err.Error(), "`lvm lvremove -y vg/lv` ran more often than the 1 time(s) recorded") {
			t.Errorf("Check = %v", err)
		}
	})
	t.Run("recordings left unused", func(t *testing.T) {
		rp := NewReplay("session.json", session())
		r := Runner{Exec: rp}
		vgs(r)
		err := rp.Check()
		if err == nil || !strings.Contains(err.Error(), "recording 4 `lvm lvremove -y vg/lv` was never replayed") ||
			!strings.Contains(err.Error(), "recording 3 `lvm vgs` was never replayed") {
			t.Errorf("Check = %v, want the unused recordings named", err)
		}
		rp.AllowUnused = "the test says why"
		if err := rp.Check(); err != nil {
			t.Errorf("Check with AllowUnused = %v", err)
		}
	})
	t.Run("Repeat lets a poller read the last state again", func(t *testing.T) {
		rp := NewReplay("session.json", session())
		rp.Repeat, rp.AllowUnused = "a poller", "only vgs"
		r := Runner{Exec: rp}
		if got := []string{vgs(r), vgs(r), vgs(r)}; !reflect.DeepEqual(got, []string{"first", "second", "second"}) {
			t.Errorf("replayed %v", got)
		}
		if err := rp.Check(); err != nil {
			t.Error(err)
		}
	})
}

func TestRecorder_RoundTrip(t *testing.T) {
	rec := NewRecorder(&scripted{answers: map[string]Result{"p lvm vgs": {Stdout: []byte("x")}}}, "unit test")
	rec.PrefixLen = 1
	r := Runner{Prefix: []string{"p"}, Exec: rec}
	if _, err := r.Run(context.Background(), "lvm", "vgs"); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "s.json")
	if err := rec.Session().Save(path); err != nil {
		t.Fatal(err)
	}
	s, err := LoadSession(path)
	if err != nil {
		t.Fatal(err)
	}
	want := &Session{Source: "unit test", Commands: []Recording{{Argv: []string{"lvm", "vgs"}, Stdout: "x"}}}
	if !reflect.DeepEqual(s, want) {
		t.Errorf("session = %+v", s)
	}
}

func TestCreateThinPoolArgs(t *testing.T) {
	got := strings.Join(CreateThinPoolArgs(ThinPool{VG: "vg1", Name: "pool", Extents: 230, ChunkSize: 131072, MetadataSize: 8 << 20, Tags: []string{OwnerTag}}), " ")
	want := "--type thin-pool -l 230 -Z y --chunksize 131072b --poolmetadatasize 8388608b --addtag lvms -n pool vg1"
	if got != want {
		t.Errorf("args:\n got %s\nwant %s", got, want)
	}
}
