package localvm

import (
	"net/netip"
	"slices"
	"strings"
	"testing"
)

func TestNetworkQemuArgs(t *testing.T) {
	n := &Network{
		Subnet:   netip.MustParsePrefix("10.200.3.0/24"),
		ToHost:   []Forward{{GuestPort: 6443, HostAddr: "127.0.0.1:41234"}},
		FromHost: []Forward{{GuestPort: 7070, HostAddr: "127.0.0.1:40001"}},
	}
	if n.Guest().String() != "10.200.3.2" || n.Gateway().String() != "10.200.3.1" || n.HostSide().String() != "10.200.3.254" {
		t.Errorf("addresses: guest %v gateway %v host side %v", n.Guest(), n.Gateway(), n.HostSide())
	}
	args, err := n.qemuArgs()
	if err != nil {
		t.Fatal(err)
	}
	if len(args) != 4 || args[0] != "-netdev" || args[2] != "-device" || args[3] != "virtio-net-pci,netdev=net0" {
		t.Fatalf("args %q", args)
	}
	opts := strings.Split(args[1], ",")
	for _, want := range []string{
		"restrict=on", // the guest reaches nothing but the forwards
		"net=10.200.3.0/24", "host=10.200.3.1",
		"guestfwd=tcp:10.200.3.254:6443-cmd:/bin/busybox nc 127.0.0.1 41234",
		"hostfwd=tcp:127.0.0.1:40001-10.200.3.2:7070",
	} {
		if !slices.Contains(opts, want) {
			t.Errorf("-netdev %s lacks %q", args[1], want)
		}
	}
	if got := n.kernelArgs(); !slices.Equal(got, []string{"lvms.ip=10.200.3.2/24", "lvms.gw=10.200.3.1"}) {
		t.Errorf("kernel args %q", got)
	}

	cfg := MachineConfig{Name: "a", Image: &Image{Kernel: "/k", Initramfs: "/i"}, WorkDir: "/w", Command: "/lvms-vm/run.sh", Network: n}
	all, err := qemuArgs(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if nic := argAfter(all, "-nic"); len(nic) != 0 {
		t.Errorf("a VM with a network still has -nic %q", nic)
	}
	if got := argAfter(all, "-append"); len(got) != 1 || !strings.Contains(got[0], "lvms.ip=10.200.3.2/24") {
		t.Errorf("-append %q lacks the guest address", got)
	}
	cfg.Network = nil
	if all, _ := qemuArgs(cfg); !slices.Contains(argAfter(all, "-nic"), "none") {
		t.Errorf("a VM without a network must have no NIC: %q", all)
	}
}

func TestNetworkRejects(t *testing.T) {
	for name, n := range map[string]Network{
		"no subnet":        {},
		"not a /24":        {Subnet: netip.MustParsePrefix("10.200.0.0/16")},
		"IPv6":             {Subnet: netip.MustParsePrefix("fd00::/120")},
		"guest port 0":     {Subnet: netip.MustParsePrefix("10.200.1.0/24"), ToHost: []Forward{{GuestPort: 0, HostAddr: "127.0.0.1:1"}}},
		"host name":        {Subnet: netip.MustParsePrefix("10.200.1.0/24"), FromHost: []Forward{{GuestPort: 1, HostAddr: "localhost:1"}}},
		"comma in address": {Subnet: netip.MustParsePrefix("10.200.1.0/24"), ToHost: []Forward{{GuestPort: 1, HostAddr: "127.0.0.1:1,hostfwd=x"}}},
	} {
		if _, err := n.qemuArgs(); err == nil {
			t.Errorf("%s: accepted %+v", name, n)
		}
	}
}
