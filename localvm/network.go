// This file puts a VM on a network: qemu's user-mode network (slirp) with restrict=on, so the guest reaches
// exactly the host ports the test forwards and nothing else, and host processes reach guest ports through
// listeners qemu opens on the host. No bridge, no tap device, no change to the host's network.

package localvm

import (
	"fmt"
	"net"
	"net/netip"
	"strconv"
	"strings"
)

// Network is a VM's network.
type Network struct {
	// Subnet is the VM's private IPv4 /24, for example 10.200.1.0/24: the guest's eth0 is its .2 (Guest),
	// its default route slirp's .1 (Gateway), and forwarded host ports are at .254 (HostSide). Give each
	// VM of a test its own subnet.
	Subnet netip.Prefix
	// ToHost are the only destinations the guest can reach: a connection from the guest to
	// HostSide():GuestPort is relayed to HostAddr on the host (a relay process per connection).
	ToHost []Forward
	// FromHost are listeners on the host: a connection to HostAddr reaches the guest at Guest():GuestPort.
	FromHost []Forward
	// Link, when set, is a second NIC (eth1) on a point-to-point cable to another VM.
	Link *Link
}

// Link is one end of a virtual cable between two VMs: UDP datagrams on the host's loopback interface, each
// end sending to the other's port, so the two guests reach each other directly and nothing else is on it
// (no root, no bridge on the host).
type Link struct {
	// LocalPort is this end's host UDP port, RemotePort the other end's.
	LocalPort, RemotePort int
	// MAC is this end's address (unique on the link).
	MAC string
}

// Forward pairs a guest port with a host address ("127.0.0.1:6443").
type Forward struct {
	GuestPort int
	HostAddr  string
}

// Guest is the guest's address on eth0.
func (n *Network) Guest() netip.Addr { return n.Subnet.Masked().Addr().Next().Next() }

// Gateway is the guest's default route (slirp itself).
func (n *Network) Gateway() netip.Addr { return n.Subnet.Masked().Addr().Next() }

// HostSide is where the guest reaches the ToHost ports (slirp refuses forwards on its own address).
func (n *Network) HostSide() netip.Addr {
	b := n.Subnet.Masked().Addr().As4()
	b[3] = 254
	return netip.AddrFrom4(b)
}

func (n *Network) validate() error {
	if !n.Subnet.IsValid() || !n.Subnet.Addr().Is4() || n.Subnet.Bits() != 24 {
		return fmt.Errorf("network subnet %v: want an IPv4 /24 such as 10.200.1.0/24", n.Subnet)
	}
	if l := n.Link; l != nil {
		if _, err := net.ParseMAC(l.MAC); err != nil || l.LocalPort <= 0 || l.LocalPort > 65535 || l.RemotePort <= 0 || l.RemotePort > 65535 || l.LocalPort == l.RemotePort {
			return fmt.Errorf("link %+v: want a MAC address and two different UDP ports", *l)
		}
	}
	for _, f := range append(append([]Forward(nil), n.ToHost...), n.FromHost...) {
		if f.GuestPort <= 0 || f.GuestPort > 65535 {
			return fmt.Errorf("forward %+v: guest port out of range", f)
		}
		host, port, err := net.SplitHostPort(f.HostAddr)
		if err != nil {
			return fmt.Errorf("forward %+v: host address: %w", f, err)
		}
		if _, err := netip.ParseAddr(host); err != nil {
			return fmt.Errorf("forward %+v: host address must be an IP: %w", f, err)
		}
		if p, err := strconv.Atoi(port); err != nil || p <= 0 || p > 65535 {
			return fmt.Errorf("forward %+v: host port out of range", f)
		}
	}
	return nil
}

// qemuArgs are the netdev and NIC for n.
func (n *Network) qemuArgs() ([]string, error) {
	if err := n.validate(); err != nil {
		return nil, err
	}
	opts := []string{"user", "id=net0", "restrict=on", "ipv6=off",
		"net=" + n.Subnet.Masked().String(), "host=" + n.Gateway().String(),
		// slirp's DHCP and DNS are never used (init sets the address); keep them off the guest's address.
		"dhcpstart=" + n.Subnet.Masked().Addr().Next().Next().Next().Next().String(),
	}
	for _, f := range n.ToHost {
		host, port, _ := net.SplitHostPort(f.HostAddr)
		// busybox-static is on every machine of the lane (the initramfs is built from it).
		opts = append(opts, fmt.Sprintf("guestfwd=tcp:%s:%d-cmd:%s nc %s %s", n.HostSide(), f.GuestPort, busyboxPath, host, port))
	}
	for _, f := range n.FromHost {
		host, port, _ := net.SplitHostPort(f.HostAddr)
		opts = append(opts, fmt.Sprintf("hostfwd=tcp:%s:%s-%s:%d", host, port, n.Guest(), f.GuestPort))
	}
	for i := range opts {
		opts[i] = optionValue(opts[i])
	}
	args := []string{"-netdev", strings.Join(opts, ","), "-device", "virtio-net-pci,netdev=net0"}
	if l := n.Link; l != nil {
		args = append(args,
			"-netdev", fmt.Sprintf("dgram,id=net1,local.type=inet,local.host=127.0.0.1,local.port=%d,remote.type=inet,remote.host=127.0.0.1,remote.port=%d", l.LocalPort, l.RemotePort),
			"-device", "virtio-net-pci,netdev=net1,mac="+l.MAC)
	}
	return args, nil
}

// kernelArgs tell init how to set up eth0.
func (n *Network) kernelArgs() []string {
	return []string{fmt.Sprintf("lvms.ip=%s/%d", n.Guest(), n.Subnet.Bits()), "lvms.gw=" + n.Gateway().String()}
}

// FreeUDPPort is a host loopback UDP port nothing is bound to now, for a Link.
func FreeUDPPort() (int, error) {
	c, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("find a free loopback UDP port: %w", err)
	}
	defer c.Close()
	return c.LocalAddr().(*net.UDPAddr).Port, nil
}

// FreeLoopbackAddr is a host loopback address with a port nothing listens on now, for a FromHost forward.
func FreeLoopbackAddr() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", fmt.Errorf("find a free loopback port: %w", err)
	}
	defer l.Close()
	return l.Addr().String(), nil
}
