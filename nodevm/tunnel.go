package nodevm

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"strings"
	"time"

	"github.com/lvms-dev/lvms/localcluster"
)

// The tunnel carries the API server's connections to kubelets and pods into a VM: qemu forwards one host
// port to the guest's tunnel port, and each connection starts with a line naming where in the guest it goes.
// (Slirp gives the host no route to guest addresses; the API server reaches them through its egress
// selector, localcluster's EgressProxy, which dials through here.)

// tunnelPort is the guest port of the tunnel.
const tunnelPort = 7070

// serveTunnel accepts tunnel connections on ln until it is closed: it reads the target line, dials the
// target inside the guest and splices both ways.
func serveTunnel(ln net.Listener) {
	for {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		go func() {
			defer c.Close()
			r := bufio.NewReader(c)
			c.SetReadDeadline(time.Now().Add(30 * time.Second))
			line, err := r.ReadString('\n')
			if err != nil {
				return
			}
			c.SetReadDeadline(time.Time{})
			target, err := net.DialTimeout("tcp", strings.TrimSpace(line), 30*time.Second)
			if err != nil {
				fmt.Fprintf(c, "ERR %v\n", err)
				return
			}
			defer target.Close()
			io.WriteString(c, "OK\n")
			localcluster.Join(c, r, target)
		}()
	}
}

// dialTunnel opens a connection to target inside the guest whose tunnel the host reaches at hostAddr.
func dialTunnel(ctx context.Context, hostAddr, target string) (net.Conn, error) {
	var d net.Dialer
	c, err := d.DialContext(ctx, "tcp", hostAddr)
	if err != nil {
		return nil, fmt.Errorf("reach the guest's tunnel at %s: %w", hostAddr, err)
	}
	if _, err := fmt.Fprintf(c, "%s\n", target); err != nil {
		c.Close()
		return nil, err
	}
	// Read the reply byte by byte: what follows it belongs to the caller.
	var reply []byte
	c.SetReadDeadline(time.Now().Add(45 * time.Second))
	for b := make([]byte, 1); len(reply) < 512; {
		if _, err := c.Read(b); err != nil {
			c.Close()
			return nil, fmt.Errorf("tunnel to %s: %w", target, err)
		}
		if b[0] == '\n' {
			break
		}
		reply = append(reply, b[0])
	}
	c.SetReadDeadline(time.Time{})
	if string(reply) != "OK" {
		c.Close()
		return nil, fmt.Errorf("tunnel to %s: %s", target, reply)
	}
	return c, nil
}

// relay serves ln by connecting each client to target (the `kubernetes` Service address in a guest, say).
func relay(ln net.Listener, target string) {
	for {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		go func() {
			defer c.Close()
			t, err := net.DialTimeout("tcp", target, 30*time.Second)
			if err != nil {
				return
			}
			defer t.Close()
			localcluster.Join(c, c, t)
		}()
	}
}
