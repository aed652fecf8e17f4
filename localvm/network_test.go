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

// A link is a second NIC sending to the other end's loopback UDP port, with its own MAC.
func TestNetworkLinkQemuArgs(t *testing.T) {
	n := &Network{Subnet: netip.MustParsePrefix("10.200.1.0/24"), Link: &Link{LocalPort: 40100, RemotePort: 40101, MAC: "52:54:00:12:35:01"}}
	args, err := n.qemuArgs()
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"-netdev", "dgram,id=net1,local.type=inet,local.host=127.0.0.1,local.port=40100,remote.type=inet,remote.host=127.0.0.1,remote.port=40101",
		"-device", "virtio-net-pci,netdev=net1,mac=52:54:00:12:35:01"}
	if len(args) != 8 || !slices.Equal(args[4:], want) {
		t.Errorf("args %q, want the user network then %q", args, want)
	}
}

func TestNetworkRejects(t *testing.T) {
	for name, n := range map[string]Network{
		"no subnet":          {},
		"not a /24":          {Subnet: netip.MustParsePrefix("10.200.0.0/16")},
		"IPv6":               {Subnet: netip.MustParsePrefix("fd00::/120")},
		"guest port 0":       {Subnet: netip.MustParsePrefix("10.200.1.0/24"), ToHost: []Forward{{GuestPort: 0, HostAddr: "127.0.0.1:1"}}},
		"host name":          {Subnet: netip.MustParsePrefix("10.200.1.0/24"), FromHost: []Forward{{GuestPort: 1, HostAddr: "localhost:1"}}},
		"comma in address":   {Subnet: netip.MustParsePrefix("10.200.1.0/24"), ToHost: []Forward{{GuestPort: 1, HostAddr: "127.0.0.1:1,hostfwd=x"}}},
		"link without MAC":   {Subnet: netip.MustParsePrefix("10.200.1.0/24"), Link: &Link{LocalPort: 1, RemotePort: 2}},
		"link to itself":     {Subnet: netip.MustParsePrefix("10.200.1.0/24"), Link: &Link{LocalPort: 1, RemotePort: 1, MAC: "52:54:00:12:35:01"}},
		"link option in MAC": {Subnet: netip.MustParsePrefix("10.200.1.0/24"), Link: &Link{LocalPort: 1, RemotePort: 2, MAC: "52:54:00:12:35:01,x=y"}},
	} {
		if _, err := n.qemuArgs(); err == nil {
			t.Errorf("%s: accepted %+v", name, n)
		}
	}
}
