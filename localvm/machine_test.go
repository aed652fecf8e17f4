package localvm

import (
	"slices"
	"strings"
	"testing"
)

func testConfig() MachineConfig {
	return MachineConfig{
		Name:    "a",
		Image:   &Image{KernelVersion: "6.1.0-56-amd64", Kernel: "/c/vmlinuz", Initramfs: "/c/initramfs-x.img"},
		WorkDir: "/tmp/run/share",
		Command: "/lvms-vm/vm-a/run.sh",
		Disks: []MachineDisk{
			{Path: "/tmp/run/disks/a-0.img", Serial: "lvms-disk0"},
			{Path: "/tmp/lun.img", Serial: "lvms-0123456789ab", Shared: true},
		},
	}
}

// argAfter returns the values following each occurrence of flag.
func argAfter(args []string, flag string) []string {
	var v []string
	for i, a := range args {
		if a == flag && i+1 < len(args) {
			v = append(v, args[i+1])
		}
	}
	return v
}

func TestQemuArgs(t *testing.T) {
	args, err := qemuArgs(testConfig())
	if err != nil {
		t.Fatal(err)
	}
	joined := strings.Join(args, " ")
	for _, bad := range []string{"kvm", "-netdev", "-enable-kvm"} {
		if strings.Contains(joined, bad) {
			t.Errorf("qemu args contain %q: %s", bad, joined)
		}
	}
	if got := argAfter(args, "-machine"); !slices.Equal(got, []string{"q35,accel=tcg"}) {
		t.Errorf("-machine %v, want q35,accel=tcg (software emulation only)", got)
	}
	if got := argAfter(args, "-nic"); !slices.Equal(got, []string{"none"}) {
		t.Errorf("-nic %v, want none", got)
	}
	if got := argAfter(args, "-m"); !slices.Equal(got, []string{"2048"}) {
		t.Errorf("-m %v, want the 2048 MiB default", got)
	}
	if got := argAfter(args, "-smp"); !slices.Equal(got, []string{"1"}) {
		t.Errorf("-smp %v, want the 1 CPU default", got)
	}
	if !slices.Contains(args, "-no-reboot") || !slices.Contains(args, "-nodefaults") {
		t.Errorf("want -no-reboot and -nodefaults: %s", joined)
	}
	fsdevs := argAfter(args, "-fsdev")
	if len(fsdevs) != 2 ||
		fsdevs[0] != "local,id=hostroot,path=/,security_model=none,readonly=on,multidevs=remap" ||
		fsdevs[1] != "local,id=lvmsvm,path=/tmp/run/share,security_model=none,multidevs=remap" {
		t.Errorf("-fsdev %v", fsdevs)
	}
	wantDrives := []string{
		"file=/tmp/run/disks/a-0.img,if=none,id=d0,format=raw,cache=unsafe",
		"file=/tmp/lun.img,if=none,id=d1,format=raw,cache=unsafe,file.locking=off",
	}
	if got := argAfter(args, "-drive"); !slices.Equal(got, wantDrives) {
		t.Errorf("-drive %v, want %v", got, wantDrives)
	}
	devices := argAfter(args, "-device")
	for _, want := range []string{
		"virtio-blk-pci,drive=d0,serial=lvms-disk0",
		"virtio-blk-pci,drive=d1,serial=lvms-0123456789ab,share-rw=on",
		"virtio-9p-pci,fsdev=hostroot,mount_tag=hostroot",
		"virtio-9p-pci,fsdev=lvmsvm,mount_tag=lvmsvm",
	} {
		if !slices.Contains(devices, want) {
			t.Errorf("no -device %s in %v", want, devices)
		}
	}
	if got := argAfter(args, "-append"); len(got) != 1 || got[0] != kernelCmdline("a", "/lvms-vm/vm-a/run.sh") {
		t.Errorf("-append %v", got)
	}
}

func TestKernelCmdline(t *testing.T) {
	got := kernelCmdline("b", "/lvms-vm/vm-b/run.sh")
	for _, want := range []string{"console=ttyS0", "panic=-1", "lvms.name=b", "lvms.cmd=/lvms-vm/vm-b/run.sh"} {
		if !slices.Contains(strings.Fields(got), want) {
			t.Errorf("kernel command line %q lacks %q", got, want)
		}
	}
	if len(got) > 256 {
		t.Errorf("kernel command line is %d bytes: keep it short, pass scripts by path", len(got))
	}
}

func TestQemuArgsRejects(t *testing.T) {
	for name, mutate := range map[string]func(*MachineConfig){
		"name with space":    func(c *MachineConfig) { c.Name = "a b" },
		"command with space": func(c *MachineConfig) { c.Command = "/bin/sh -c x" },
		"no work dir":        func(c *MachineConfig) { c.WorkDir = "" },
		"no disk path":       func(c *MachineConfig) { c.Disks[0].Path = "" },
		"long serial":        func(c *MachineConfig) { c.Disks[0].Serial = strings.Repeat("x", 21) },
		"serial with comma":  func(c *MachineConfig) { c.Disks[0].Serial = "a,b" },
		"no image":           func(c *MachineConfig) { c.Image = nil },
	} {
		cfg := testConfig()
		mutate(&cfg)
		if _, err := qemuArgs(cfg); err == nil {
			t.Errorf("%s: want an error", name)
		}
	}
}

func TestConsoleParser(t *testing.T) {
	var lines []string
	c := &consoleParser{out: writerFunc(func(p []byte) { lines = append(lines, string(p)) }), exitCode: -1}
	c.Write([]byte("[    1.0] kernel\r\nLVMS-VM-STA"))
	c.Write([]byte("RT\r\nhello\r\nLVMS-VM-EXIT 3\r\n[    9.9] reboot: Power down"))
	c.flush()
	want := []string{"[    1.0] kernel", "LVMS-VM-START", "hello", "LVMS-VM-EXIT 3", "[    9.9] reboot: Power down"}
	if !slices.Equal(lines, want) {
		t.Errorf("lines %q, want %q", lines, want)
	}
	if c.exitCode != 3 || c.bootTime <= 0 || c.setupErr != "" {
		t.Errorf("exit code %d, boot time %v, setup error %q", c.exitCode, c.bootTime, c.setupErr)
	}

	c = &consoleParser{exitCode: -1}
	c.Write([]byte("LVMS-VM-ERROR mount the host root over 9p (tag hostroot)\n"))
	if c.exitCode != -1 || c.setupErr != "mount the host root over 9p (tag hostroot)" {
		t.Errorf("exit code %d, setup error %q", c.exitCode, c.setupErr)
	}
	if note := c.tailNote(); !strings.Contains(note, "LVMS-VM-ERROR") {
		t.Errorf("tail note %q lacks the last line", note)
	}
}

type writerFunc func([]byte)

func (f writerFunc) Write(p []byte) (int, error) { f(p); return len(p), nil }

func TestQemuArgsEscapeCommas(t *testing.T) {
	cfg := testConfig()
	cfg.WorkDir = "/tmp/TestVMX,y/share"
	cfg.Disks[0].Path = "/tmp/TestVMX,y/a.img"
	args, err := qemuArgs(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if got := argAfter(args, "-fsdev")[1]; got != "local,id=lvmsvm,path=/tmp/TestVMX,,y/share,security_model=none,multidevs=remap" {
		t.Errorf("-fsdev %s", got)
	}
	if got := argAfter(args, "-drive")[0]; !strings.HasPrefix(got, "file=/tmp/TestVMX,,y/a.img,if=none") {
		t.Errorf("-drive %s", got)
	}
}
