package lvmd

import (
	"context"
	"errors"
	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/lvms-dev/lvms/nodeagent/lvm"
)

// topolvmExample is TopoLVM's documented lvmd.yaml, which MicroShift hosts carry.
const topolvmExample = `socket-name: /run/topolvm/lvmd.sock
lvm-command-prefix: ["/usr/bin/nsenter","-m","-u","-i","-n","-p","-t","1","/sbin/lvm"]
device-classes:
  - name: ssd
    volume-group: myvg1
    default: true
    spare-gb: 10
    stripe: 2
    stripe-size: "64"
    lvcreate-options: ["--type=raid1"]
    type: thick
  - name: ssd-thin
    volume-group: myvg1
    type: thin
    thin-pool:
      name: thinpool
      overprovision-ratio: 10.0
lvcreate-option-classes:
  - name: raid1
    options: ["--type=raid1"]
`

func TestParse_TopoLVMFormat(t *testing.T) {
	cfg, err := Parse([]byte(topolvmExample))
	if err != nil {
		t.Fatal(err)
	}
	if err := cfg.Validate(); err != nil {
		t.Fatalf("validate: %v", err)
	}
	spare, stripe := uint64(10), uint(2)
	want := &Config{
		SocketName:       "/run/topolvm/lvmd.sock",
		LVMCommandPrefix: []string{"/usr/bin/nsenter", "-m", "-u", "-i", "-n", "-p", "-t", "1", "/sbin/lvm"},
		DeviceClasses: []DeviceClass{
			{Name: "ssd", VolumeGroup: "myvg1", Default: true, SpareGB: &spare, Stripe: &stripe, StripeSize: "64", LVCreateOptions: []string{"--type=raid1"}, Type: TypeThick},
			{Name: "ssd-thin", VolumeGroup: "myvg1", Type: TypeThin, ThinPool: &ThinPoolConfig{Name: "thinpool", OverprovisionRatio: 10}},
		},
		LVCreateOptionClasses: []LVCreateOptionClass{{Name: "raid1", Options: []string{"--type=raid1"}}},
	}
	if !reflect.DeepEqual(cfg, want) {
		t.Errorf("config = %+v", cfg)
	}
}

func TestParse_Errors(t *testing.T) {
	tests := []struct {
		name, input, wantErr string
	}{
		{"wrong type", "device-classes:\n  - name: a\n    volume-group: v\n    spare-gb: ten\n", `line 4: device-classes[0].spare-gb is "ten", not a whole number`},
		{"a negative spare", "device-classes:\n  - name: a\n    volume-group: v\n    spare-gb: -1\n", "line 4: device-classes[0].spare-gb"},
		{"a map where a list belongs", "device-classes:\n  name: a\n", "line 2: device-classes is a map, not a list"},
		{"not YAML", "device-classes: [\n", "yaml"},
		{"list where a map belongs", "- a\n- b\n", "line 1: the file is a list, not a map of keys"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse([]byte(tc.input))
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("err = %v, want it to contain %q", err, tc.wantErr)
			}
		})
	}
}

// TestParse_UnknownKeys: keys nothing reads are accepted, as TopoLVM's lvmd accepts them, and listed with
// their lines and where they are.
func TestParse_UnknownKeys(t *testing.T) {
	in := "socket-name: /run/topolvm/lvmd.sock\ndevce-classes: []\ndevice-classes:\n  - name: a\n    volume-group: v\n    thinpool: {}\n" +
		"    type: thin\n    thin-pool:\n      name: p\n      overprovision-ratio: 2\n      colour: blue\n"
	cfg, err := Parse([]byte(in))
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		`line 2: unknown key "devce-classes" at the top level (TopoLVM's lvmd ignores it, and so does LVMS)`,
		`line 6: unknown key "thinpool" in device-classes[0] (TopoLVM's lvmd ignores it, and so does LVMS)`,
		`line 11: unknown key "colour" in device-classes[0].thin-pool (TopoLVM's lvmd ignores it, and so does LVMS)`,
	}
	if !reflect.DeepEqual(cfg.Unknown, want) {
		t.Errorf("unknown keys:\n%s\nwant\n%s", strings.Join(cfg.Unknown, "\n"), strings.Join(want, "\n"))
	}
	if cfg.DeviceClasses[0].ThinPool.Name != "p" || cfg.SocketName != "/run/topolvm/lvmd.sock" {
		t.Errorf("the known keys were not read: %+v", cfg)
	}
	if out, _ := Marshal(cfg); strings.Contains(string(out), "line 2") {
		t.Errorf("the warnings were written into the file: %s", out)
	}
}

// TestParse_UsageThresholds: LVMS's threshold keys are read; TopoLVM's files, which lack them, get the
// defaults; either way the file stays valid.
func TestParse_UsageThresholds(t *testing.T) {
	in := "device-classes:\n  - name: a\n    volume-group: v\n    type: thin\n    thin-pool:\n      name: p\n      overprovision-ratio: 2\n" +
		"      data-usage-threshold: 80\n      metadata-usage-threshold: 60.5\n"
	cfg, err := Parse([]byte(in))
	if err != nil {
		t.Fatal(err)
	}
	if err := cfg.Validate(); err != nil || len(cfg.Unknown) > 0 {
		t.Fatalf("validate: %v, unknown keys %v", err, cfg.Unknown)
	}
	if d, m := cfg.DeviceClasses[0].ThinPool.Thresholds(); d != 80 || m != 60.5 {
		t.Errorf("thresholds = %v, %v; want 80, 60.5", d, m)
	}
	old, err := Parse([]byte(topolvmExample))
	if err != nil {
		t.Fatal(err)
	}
	if d, m := old.DeviceClasses[1].ThinPool.Thresholds(); d != DefaultDataUsageThreshold || m != DefaultMetadataUsageThreshold {
		t.Errorf("TopoLVM's file: thresholds = %v, %v; want the defaults", d, m)
	}
	if out, _ := Marshal(old); strings.Contains(string(out), "usage-threshold") {
		t.Errorf("a file without thresholds was written with them:\n%s", out)
	}
}

// TestParse_TextFromNumbers: a number where a string belongs is read as its text, as TopoLVM reads it.
func TestParse_TextFromNumbers(t *testing.T) {
	cfg, err := Parse([]byte("device-classes:\n  - name: 1\n    volume-group: v\n    stripe-size: 64\n"))
	if err != nil || cfg.DeviceClasses[0].StripeSize != "64" || cfg.DeviceClasses[0].Name != "1" {
		t.Fatalf("got %+v, %v", cfg, err)
	}
}

func TestValidate(t *testing.T) {
	tests := []struct {
		name    string
		cfg     Config
		wantErr []string
	}{
		{"no device classes", Config{}, []string{"device-classes is empty"}},
		{"bad and duplicate names, two defaults", Config{DeviceClasses: []DeviceClass{
			{Name: "-bad", VolumeGroup: "a", Default: true}, {Name: "x", VolumeGroup: "b", Default: true}, {Name: "x", VolumeGroup: "c"}}},
			[]string{`device class "-bad": the name must be`, `device class "x" is defined twice`, "2 device classes are marked default"}},
		{"thin without pool, ratio below 1, unknown type", Config{DeviceClasses: []DeviceClass{
			{Name: "a", VolumeGroup: "v", Type: TypeThin}, {Name: "b", VolumeGroup: "v", Type: TypeThin, ThinPool: &ThinPoolConfig{Name: "p", OverprovisionRatio: 0.5}},
			{Name: "c", VolumeGroup: "w", Type: "fat"}}},
			[]string{`device class "a": type thin needs thin-pool`, "overprovision-ratio must be at least 1.0", `type "fat" is neither thick nor thin`}},
		{"thresholds of 0 and above 100", Config{DeviceClasses: []DeviceClass{{Name: "a", VolumeGroup: "v", Type: TypeThin,
			ThinPool: &ThinPoolConfig{Name: "p", OverprovisionRatio: 2, DataUsageThreshold: new(0.0), MetadataUsageThreshold: new(101.0)}}}},
			[]string{"thin-pool data-usage-threshold is 0; it must be a percentage above 0 and at most 100", "thin-pool metadata-usage-threshold is 101"}},
		{"two classes on one volume group", Config{DeviceClasses: []DeviceClass{{Name: "a", VolumeGroup: "v"}, {Name: "b", VolumeGroup: "v", Type: TypeThick}}},
			[]string{`device class "b" and device class "a" both allocate from v`}},
		{"missing volume group and a bad stripe size", Config{DeviceClasses: []DeviceClass{{Name: "a", StripeSize: "64x"}}},
			[]string{`device class "a" has no volume-group`, `stripe-size "64x"`}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.cfg.Validate()
			if err == nil {
				t.Fatal("no error")
			}
			for _, w := range tc.wantErr {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("err = %v\nwant it to contain %q", err, w)
				}
			}
		})
	}
}

func TestCheckLVM(t *testing.T) {
	rep := &lvm.Report{VGs: []lvm.VG{{Name: "vg1"}}, LVs: []lvm.LV{{VGName: "vg1", Name: "pool", Attr: "twi-a-tz--"}, {VGName: "vg1", Name: "lv", Attr: "-wi-a-----"}}}
	cfg := &Config{DeviceClasses: []DeviceClass{
		{Name: "ok", VolumeGroup: "vg1"},
		{Name: "thin-ok", VolumeGroup: "vg1", Type: TypeThin, ThinPool: &ThinPoolConfig{Name: "pool", OverprovisionRatio: 1}},
		{Name: "no-vg", VolumeGroup: "vg9"},
		{Name: "not-a-pool", VolumeGroup: "vg1", Type: TypeThin, ThinPool: &ThinPoolConfig{Name: "lv", OverprovisionRatio: 1}},
	}}
	want := []string{
		"device class no-vg uses volume group vg9, which does not exist on this node",
		"device class not-a-pool uses thin pool vg1/lv, which does not exist on this node",
	}
	if got := cfg.CheckLVM(rep); !reflect.DeepEqual(got, want) {
		t.Errorf("problems = %q", got)
	}
}

func TestWrite_AtomicAndIdempotent(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "etc", "lvmd.yaml")
	cfg := &Config{SocketName: "/run/topolvm/lvmd.sock", DeviceClasses: []DeviceClass{{Name: "vg1", VolumeGroup: "vg1", Default: true}}}
	changed, err := Write(path, cfg)
	if err != nil || !changed {
		t.Fatalf("first write: changed=%v err=%v", changed, err)
	}
	back, err := Load(path)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(back, cfg) {
		t.Errorf("read back %+v", back)
	}
	if changed, err := Write(path, cfg); err != nil || changed {
		t.Errorf("same content: changed=%v err=%v; want no write", changed, err)
	}
	entries, _ := os.ReadDir(filepath.Dir(path))
	if len(entries) != 1 {
		t.Errorf("directory holds %d entries, want only lvmd.yaml (no temporary files left)", len(entries))
	}
	if err := Remove(path); err != nil {
		t.Fatal(err)
	}
	if err := Remove(path); err != nil {
		t.Errorf("removing a missing file: %v", err)
	}
	if _, err := Load(path); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("load missing: %v", err)
	}
}

func waitChange(t *testing.T, ch <-chan struct{}) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(30 * time.Second):
		t.Fatal("the watcher did not report the change")
	}
}

func TestWatcher_ReloadsInProcess(t *testing.T) {
	path := filepath.Join(t.TempDir(), "lvmd.yaml")
	w := NewWatcher(path, 10*time.Millisecond)
	if _, err := w.Current(); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("missing file: err = %v", err)
	}
	changes := w.Changes()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- w.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })

	if _, err := Write(path, &Config{DeviceClasses: []DeviceClass{{Name: "a", VolumeGroup: "vg-a"}}}); err != nil {
		t.Fatal(err)
	}
	waitChange(t, changes)
	if cfg, err := w.Current(); err != nil || cfg.DeviceClasses[0].VolumeGroup != "vg-a" {
		t.Fatalf("after write: %+v, %v", cfg, err)
	}

	if err := os.WriteFile(path, []byte("device-classes:\n  - name: a\n    spare-gb: lots\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	waitChange(t, changes)
	_, err := w.Current()
	var invalid *InvalidError
	if !errors.As(err, &invalid) || !strings.Contains(err.Error(), `spare-gb`) {
		t.Fatalf("malformed file: err = %v", err)
	}

	if _, err := Write(path, &Config{DeviceClasses: []DeviceClass{{Name: "b", VolumeGroup: "vg-b"}}}); err != nil {
		t.Fatal(err)
	}
	waitChange(t, changes)
	if cfg, err := w.Current(); err != nil || cfg.DeviceClasses[0].Name != "b" {
		t.Fatalf("after the fix: %+v, %v", cfg, err)
	}
}

func FuzzParse(f *testing.F) {
	f.Add([]byte(topolvmExample))
	f.Add([]byte("device-classes:\n  - name: a\n    spare-gb: -1\n"))
	f.Add([]byte("devce-classes: []\ndevice-classes:\n  - name: a\n    colour: blue\n    thin-pool: {name: p, x: 1}\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		cfg, err := Parse(data)
		if err != nil {
			return
		}
		_ = cfg.Validate()
		_ = cfg.CheckLVM(&lvm.Report{})
		out, err := Marshal(cfg)
		if err != nil {
			t.Fatalf("a parsed config does not render: %v", err)
		}
		// What the agent writes, lvmd (and the agent on its next pass) must read back as the same config.
		back, err := Parse(out)
		if err != nil {
			t.Fatalf("the rendered config does not parse: %v\n%s", err, out)
		}
		// Keys nothing reads are dropped from what the agent writes; everything read survives.
		if len(back.Unknown) > 0 {
			t.Fatalf("the rendered config has keys nothing reads: %v\n%s", back.Unknown, out)
		}
		ignore := cmpopts.IgnoreFields(Config{}, "Unknown")
		if !cmp.Equal(cfg, back, cmpopts.EquateEmpty(), ignore) {
			t.Fatalf("round trip changed the config:\n%s", cmp.Diff(cfg, back, cmpopts.EquateEmpty(), ignore))
		}
	})
}

// TestParse_Samples: the lvmd.yaml shapes MicroShift documents parse, validate and carry no unknown key.
func TestParse_Samples(t *testing.T) {
	for _, name := range []string{"microshift-default.yaml", "microshift-thin.yaml"} {
		t.Run(name, func(t *testing.T) {
			cfg, err := Load(filepath.Join("testdata", name))
			if err != nil {
				t.Fatal(err)
			}
			if err := cfg.Validate(); err != nil || len(cfg.Unknown) > 0 || cfg.SocketName != "/run/lvmd/lvmd.socket" {
				t.Errorf("validate: %v; unknown keys %v; socket %q", err, cfg.Unknown, cfg.SocketName)
			}
			if dc := cfg.DeviceClasses[0]; !dc.Default || dc.SpareGB == nil || *dc.SpareGB != 0 || dc.VolumeGroup != "rhel" {
				t.Errorf("first device class %+v: want the default one on rhel with spare-gb 0", dc)
			}
		})
	}
}
